package main

import (
	"encoding/json"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionInfoFrom(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "v0.3.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123abc"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"}}}
	read := func() (*debug.BuildInfo, bool) { return bi, true }

	// ldflags win over the build info.
	got := versionInfoFrom("v1.2.3", "feedbeef", "2026-12-01T00:00:00Z", read)
	if got.Version != "v1.2.3" || got.Commit != "feedbeef" || got.BuildDate != "2026-12-01T00:00:00Z" || got.GoVersion != "go1.99" {
		t.Errorf("ldflags: %+v", got)
	}
	// Without ldflags: module version and VCS stamps, a dirty tree marked.
	got = versionInfoFrom("", "", "", read)
	if got.Version != "v0.3.0" || got.Commit != "0123abc-dirty" || got.BuildDate != "2026-01-02T03:04:05Z" {
		t.Errorf("build info: %+v", got)
	}
	// A local build: (devel), no VCS stamps.
	bi = &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}
	got = versionInfoFrom("", "", "", read)
	if got.Version != "dev" || got.Commit != "unknown" || got.BuildDate != "unknown" || got.GoVersion != runtime.Version() {
		t.Errorf("devel: %+v", got)
	}
	if got.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("platform %q", got.Platform)
	}
}

func TestVersionCommand(t *testing.T) {
	out, _, err := runCLI(nil, "version", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var vi VersionInfo
	if err := json.Unmarshal([]byte(out), &vi); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if vi.Version == "" || vi.GoVersion == "" || vi.Platform == "" {
		t.Errorf("%+v", vi)
	}
	if _, _, err := runCLI(nil, "version", "-o", "xml"); exitCode(err) != 2 {
		t.Errorf("-o xml: %v (exit %d), want a usage error", err, exitCode(err))
	}
	if out, _, err := runCLI(nil, "version", "--short"); err != nil || out != vi.Version+"\n" {
		t.Errorf("--short: %q %v", out, err)
	}
	if out, _, err := runCLI(nil, "version", "-o", "yaml"); err != nil || !strings.Contains(out, "goVersion: ") {
		t.Errorf("-o yaml: %q %v", out, err)
	}
}
