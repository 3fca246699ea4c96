package image

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestMakeImage runs `make image` as a user would on a fresh clone (no
// registry, no base image), then opens the archive it wrote and checks the
// image: the non-root user, the entrypoint, the labels, and the binary taken
// out of the layer runs (`planner version`) and carries the version stamp.
func TestMakeImage(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make is needed to run the make image target: %v", err)
	}
	bin := t.TempDir()
	const version = "v0.0.0-imagetest"
	cmd := exec.Command("make", "-C", "../..", "image", "VERSION="+version, "BIN="+bin, "COMMIT=0123456789abcdef", "BUILD_DATE=2026-01-02T03:04:05Z")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	archive := filepath.Join(bin, "images", "planner-"+version+".tar")
	imgs, err := Open(archive, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(imgs) != 1 {
		t.Fatalf("%d images in %s, want 1 (make image builds this machine's architecture)", len(imgs), archive)
	}
	img := imgs[0]
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s", cf.OS, cf.Architecture)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (nonroot)", cf.Config.User)
	}
	if strings.Join(cf.Config.Entrypoint, " ") != "/planner" {
		t.Errorf("entrypoint %q", cf.Config.Entrypoint)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.title":    "planner",
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": "0123456789abcdef",
		"org.opencontainers.image.created":  "2026-01-02T03:04:05Z",
		"org.opencontainers.image.licenses": "Apache-2.0",
	} {
		if got := cf.Config.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v; want one", len(layers), err)
	}
	passwd, _, err := ExtractFile(img, "etc/passwd")
	if err != nil || !strings.Contains(string(passwd), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd lacks the nonroot user (%v):\n%s", err, passwd)
	}
	group, _, err := ExtractFile(img, "etc/group")
	if err != nil || !strings.Contains(string(group), "nonroot:x:65532:") {
		t.Errorf("/etc/group lacks the nonroot group (%v):\n%s", err, group)
	}
	b, h, err := ExtractFile(img, "planner")
	if err != nil {
		t.Fatal(err)
	}
	if h.Mode&0o111 == 0 || h.Uid != 0 {
		t.Errorf("/planner mode %o uid %d: want executable, owned by root (the nonroot user cannot replace it)", h.Mode, h.Uid)
	}
	exe := filepath.Join(t.TempDir(), "planner")
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	vout, err := exec.Command(exe, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("planner version from the image: %v", err)
	}
	var vi struct{ Version, Commit, BuildDate, Platform string }
	if err := json.Unmarshal(vout, &vi); err != nil {
		t.Fatalf("%v: %s", err, vout)
	}
	if vi.Version != version || vi.Commit != "0123456789abcdef" || vi.BuildDate != "2026-01-02T03:04:05Z" || vi.Platform != "linux/"+runtime.GOARCH {
		t.Errorf("planner version from the image: %+v", vi)
	}
	t.Logf("%s: %s", archive, strings.TrimSpace(string(vout)))
}
