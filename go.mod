module github.com/progress-planner/planner

go 1.26

require (
	github.com/spf13/cobra v1.10.2
	gonum.org/v1/gonum v0.17.0
	sigs.k8s.io/yaml v1.6.0
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	golang.org/x/tools v0.30.0 // indirect
)
