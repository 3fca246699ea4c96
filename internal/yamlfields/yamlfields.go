// Package yamlfields finds the keys of a YAML document that a Go type does
// not have, with their full paths, so that strict config parsing can name a
// typo precisely ("plateau.enterProb (known at this level: …)");
// encoding/json's strict mode names only the key.
package yamlfields

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// Unknown lists the full paths of the keys in data that t (a struct type)
// does not have, each with the known keys at its level. Fields are matched
// by their JSON names, case-insensitively as encoding/json does; embedded
// structs tagged `json:",inline"` are flattened. Types in leaves (such as a
// duration that marshals as a string) are not descended into. Data that is
// not YAML yields nil: the caller's decoder reports that error.
func Unknown(data []byte, t reflect.Type, leaves ...reflect.Type) []string {
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil
	}
	var out []string
	walk(doc, t, "", leaves, &out)
	return out
}

func walk(v any, t reflect.Type, path string, leaves []reflect.Type, out *[]string) {
	if slices.Contains(leaves, t) {
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		walk(v, t.Elem(), path, leaves, out)
	case reflect.Slice:
		if list, ok := v.([]any); ok {
			for i, e := range list {
				walk(e, t.Elem(), path+"["+strconv.Itoa(i)+"]", leaves, out)
			}
		}
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		fields := map[string]reflect.Type{}
		var known []string
		jsonFields(t, fields, &known)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			ft, ok := fields[strings.ToLower(k)]
			if !ok {
				*out = append(*out, fmt.Sprintf("%q (known at this level: %s)", p, strings.Join(known, ", ")))
				continue
			}
			walk(m[k], ft, p, leaves, out)
		}
	}
}

// jsonFields maps the lower-cased JSON names of t's fields (inline embedded
// structs flattened) to their types.
func jsonFields(t reflect.Type, fields map[string]reflect.Type, known *[]string) {
	for i := range t.NumField() {
		sf := t.Field(i)
		name, opts, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" && sf.Anonymous && strings.Contains(opts, "inline") {
			jsonFields(sf.Type, fields, known)
			continue
		}
		if name == "" {
			continue
		}
		key := strings.ToLower(name)
		if _, dup := fields[key]; !dup {
			*known = append(*known, name)
		}
		fields[key] = sf.Type
	}
}
