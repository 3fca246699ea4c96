package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// Set at build time by make build/image/release:
//
//	go build -ldflags "-X main.version=v1.2.3 -X main.commit=abc123 -X main.buildDate=2026-01-02T03:04:05Z"
//
// Left empty they are filled from debug.BuildInfo (the module version for
// `go install …@v1.2.3`, the VCS stamps for a build in a git checkout).
var (
	version   = ""
	commit    = ""
	buildDate = ""
)

// VersionInfo is what `planner version` prints.
type VersionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	BuildDate string `json:"buildDate"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// versionInfo combines the ldflags stamps with debug.BuildInfo; ldflags win
// because a release build (-trimpath, -buildvcs=false in CI) has no VCS
// stamps, and `go install` has no ldflags.
func versionInfo() VersionInfo {
	return versionInfoFrom(version, commit, buildDate, debug.ReadBuildInfo)
}

func versionInfoFrom(v, c, d string, read func() (*debug.BuildInfo, bool)) VersionInfo {
	vi := VersionInfo{Version: v, Commit: c, BuildDate: d, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := read(); ok {
		if vi.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			vi.Version = bi.Main.Version
		}
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if vi.Commit == "" {
					vi.Commit = s.Value
				}
			case "vcs.time":
				if vi.BuildDate == "" {
					vi.BuildDate = s.Value
				}
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if dirty && c == "" && vi.Commit != "" {
			vi.Commit += "-dirty"
		}
		if bi.GoVersion != "" {
			vi.GoVersion = bi.GoVersion
		}
	}
	for _, f := range []*string{&vi.Version, &vi.Commit, &vi.BuildDate} {
		if *f == "" {
			*f = "unknown"
		}
	}
	if vi.Version == "unknown" {
		vi.Version = "dev"
	}
	return vi
}

func newVersionCmd() *cobra.Command {
	var short bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the planner's version, commit, build date and Go version",
		Args:  cobra.NoArgs,
	}
	output := addOutputFlag(cmd, formatTable, formatJSON, formatYAML)
	cmd.Flags().BoolVar(&short, "short", false, "print the version only")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		vi := versionInfo()
		w := cmd.OutOrStdout()
		switch {
		case short:
			fmt.Fprintln(w, vi.Version)
		case output.value == formatJSON:
			b, err := json.MarshalIndent(vi, "", "  ")
			if err != nil {
				return err
			}
			fmt.Fprintln(w, string(b))
		case output.value == formatYAML:
			b, err := yaml.Marshal(vi)
			if err != nil {
				return err
			}
			_, err = w.Write(b)
			return err
		default:
			fmt.Fprintf(w, "version:   %s\ncommit:    %s\nbuildDate: %s\ngoVersion: %s\nplatform:  %s\n",
				vi.Version, vi.Commit, vi.BuildDate, vi.GoVersion, vi.Platform)
		}
		return nil
	}
	return cmd
}
