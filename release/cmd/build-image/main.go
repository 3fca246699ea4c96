// Command build-image writes an OCI image archive of a static binary, from
// scratch and offline (package image): make image / make images.
//
//	go run ./cmd/build-image --name planner --ref ghcr.io/progress-planner/planner:v0.1.0 \
//	    --bin linux/amd64=../bin/linux-amd64/planner --bin linux/arm64=../bin/linux-arm64/planner \
//	    --version v0.1.0 --commit abc --created 2026-12-01T00:00:00Z --out ../bin/images/planner.tar
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/progress-planner/planner/release/image"
)

type binFlags []string

func (b *binFlags) String() string     { return strings.Join(*b, ",") }
func (b *binFlags) Set(v string) error { *b = append(*b, v); return nil }

func main() {
	var bins binFlags
	name := flag.String("name", "", "binary name in the image (/NAME is the entrypoint)")
	ref := flag.String("ref", "", "image reference REGISTRY/NAME:TAG written into the archive")
	version := flag.String("version", "dev", "org.opencontainers.image.version")
	commit := flag.String("commit", "unknown", "org.opencontainers.image.revision")
	created := flag.String("created", "", "image creation time, RFC 3339 (default: 1970-01-01, reproducible)")
	desc := flag.String("description", "", "org.opencontainers.image.description")
	out := flag.String("out", "", "archive to write")
	var args binFlags
	flag.Var(&bins, "bin", "linux/ARCH=PATH of a static binary; repeat for each platform")
	flag.Var(&args, "arg", "default argument (image Cmd); repeatable")
	flag.Parse()
	if err := run(*name, *ref, *version, *commit, *created, *desc, *out, bins, args); err != nil {
		fmt.Fprintln(os.Stderr, "build-image:", err)
		os.Exit(1)
	}
}

func run(name, ref, version, commit, created, desc, out string, bins, args []string) error {
	if name == "" || ref == "" || out == "" || len(bins) == 0 {
		return fmt.Errorf("--name, --ref, --out and at least one --bin are required")
	}
	t := time.Unix(0, 0).UTC()
	if created != "" {
		var err error
		if t, err = time.Parse(time.RFC3339, created); err != nil {
			return fmt.Errorf("--created: %w", err)
		}
	}
	var imgs []v1.Image
	for _, b := range bins {
		plat, path, ok := strings.Cut(b, "=")
		arch, found := strings.CutPrefix(plat, "linux/")
		if !ok || !found || arch == "" {
			return fmt.Errorf("--bin %q: want linux/ARCH=PATH", b)
		}
		img, err := image.Build(image.Spec{Binary: path, Name: name, Arch: arch, Version: version, Commit: commit, Created: t,
			Source: "https://github.com/progress-planner/planner", Title: name, Desc: desc, Args: args})
		if err != nil {
			return fmt.Errorf("%s: %w", plat, err)
		}
		imgs = append(imgs, img)
	}
	if err := image.WriteArchive(out, ref, imgs...); err != nil {
		return err
	}
	fmt.Printf("%s: %s (%d platform(s))\n", out, ref, len(imgs))
	return nil
}
