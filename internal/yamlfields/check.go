package yamlfields

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
)

// Check refuses what the YAML-to-JSON conversion of sigs.k8s.io/yaml would
// drop silently or report without a field: a second document (only the
// first is read, so a later `mode: enforce` would be ignored), and a
// non-finite number (.nan, .inf), named by its path. Data that is
// not YAML passes: the caller's decoder reports that error.
func Check(data []byte) error {
	dec := yamlv3.NewDecoder(strings.NewReader(string(data)))
	var doc yamlv3.Node
	if err := dec.Decode(&doc); err != nil {
		return nil
	}
	var second yamlv3.Node
	switch err := dec.Decode(&second); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return fmt.Errorf("a second YAML document that does not parse (one document per file): %w", err)
	default:
		return fmt.Errorf("a second YAML document at line %d: one document per file (the second would be ignored)", second.Line)
	}
	var bad []string
	nonFinite(&doc, "", &bad)
	if len(bad) > 0 {
		return fmt.Errorf("%s: not a finite number", strings.Join(bad, ", "))
	}
	return nil
}

// nonFinite appends the paths of the non-finite floats under n.
func nonFinite(n *yamlv3.Node, path string, out *[]string) {
	switch n.Kind {
	case yamlv3.DocumentNode:
		for _, c := range n.Content {
			nonFinite(c, path, out)
		}
	case yamlv3.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := n.Content[i].Value
			if path != "" {
				p = path + "." + p
			}
			nonFinite(n.Content[i+1], p, out)
		}
	case yamlv3.SequenceNode:
		for i, c := range n.Content {
			nonFinite(c, path+"["+strconv.Itoa(i)+"]", out)
		}
	case yamlv3.ScalarNode:
		var f float64
		if n.ShortTag() == "!!float" && n.Decode(&f) == nil && (math.IsNaN(f) || math.IsInf(f, 0)) {
			if path == "" {
				path = "the document"
			}
			*out = append(*out, fmt.Sprintf("%s (line %d): %q", path, n.Line, n.Value))
		}
	}
}
