// Package image builds the planner's container images offline, from
// scratch, with go-containerregistry: one layer holding a static binary
// and the passwd/group entries of the nonroot user (UID/GID 65532, as
// distroless static:nonroot), no base image to pull. The result is an OCI
// image layout written as a tar archive ("oci-archive"): `docker load`,
// `podman load` and `skopeo copy oci-archive:FILE docker://REGISTRY/...`
// read it.
package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// NonRoot is distroless's nonroot user and group.
const NonRoot = 65532

// Spec describes one single-platform image.
type Spec struct {
	Binary  string // path of the static binary to put at /Name
	Name    string // binary name in the image: /planner, /planner-scheduler
	Arch    string // GOARCH: amd64, arm64
	Version string
	Commit  string
	Created time.Time // image and file times (reproducible builds: the commit time)
	Source  string    // org.opencontainers.image.source
	Title   string
	Desc    string
	// Args are the default arguments after the entrypoint (Cmd).
	Args []string
}

// Labels are the OCI annotations set as image labels.
func (s Spec) Labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       s.Title,
		"org.opencontainers.image.description": s.Desc,
		"org.opencontainers.image.version":     s.Version,
		"org.opencontainers.image.revision":    s.Commit,
		"org.opencontainers.image.created":     s.Created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.source":      s.Source,
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
}

// Build returns the image of s.
func Build(s Spec) (v1.Image, error) {
	bin, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, err
	}
	if s.Name == "" || strings.Contains(s.Name, "/") {
		return nil, fmt.Errorf("image binary name %q: want a plain file name", s.Name)
	}
	layerTar, err := rootfs(s.Name, bin, s.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, MediaType: types.OCILayer, History: v1.History{
		Created: v1.Time{Time: s.Created}, CreatedBy: "release/cmd/build-image: /" + s.Name + " and the nonroot user", Comment: "static binary",
	}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", s.Arch
	cf.Created = v1.Time{Time: s.Created}
	cf.Config.User = fmt.Sprintf("%d:%d", NonRoot, NonRoot)
	cf.Config.Entrypoint = []string{"/" + s.Name}
	cf.Config.Cmd = s.Args
	cf.Config.WorkingDir = "/home/nonroot"
	cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/nonroot"}
	cf.Config.Labels = s.Labels()
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, v1.Time{Time: s.Created})
}

// rootfs is the single layer: the binary, and just enough of /etc for a
// named non-root user (kubectl exec whoami, log lines, ps) and a writable
// home and /tmp (the pod mounts its root filesystem read-only anyway).
func rootfs(name string, bin []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(path string, mode int64, uid int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: path + "/", Mode: mode, Uid: uid, Gid: uid, ModTime: mtime, Format: tar.FormatPAX})
	}
	file := func(path string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path, Mode: mode, Size: int64(len(data)), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRoot, NonRoot)
	group := fmt.Sprintf("root:x:0:\nnobody:x:65534:\nnonroot:x:%d:\n", NonRoot)
	steps := []func() error{
		func() error { return dir("etc", 0o755, 0) },
		func() error { return file("etc/passwd", 0o644, []byte(passwd)) },
		func() error { return file("etc/group", 0o644, []byte(group)) },
		func() error { return dir("home", 0o755, 0) },
		func() error { return dir("home/nonroot", 0o700, NonRoot) },
		func() error { return dir("tmp", 0o1777, 0) },
		func() error { return file(name, 0o755, bin) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteArchive writes the images, one per platform, as an OCI image index
// in an image layout tarred into file; ref (REGISTRY/NAME:TAG) names the
// index for docker/containerd (io.containerd.image.name) and OCI tools
// (org.opencontainers.image.ref.name, the tag).
func WriteArchive(file, ref string, imgs ...v1.Image) error {
	var idx v1.ImageIndex = mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, img := range imgs {
		cf, err := img.ConfigFile()
		if err != nil {
			return err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: cf.OS, Architecture: cf.Architecture},
		}})
	}
	tmp, err := os.MkdirTemp("", "oci-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return err
	}
	tag := ref
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		tag = ref[i+1:]
	}
	// A single platform is written as the image itself, which docker load
	// takes directly; several as the index.
	annotations := map[string]string{"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": tag}
	if len(imgs) == 1 {
		err = p.AppendImage(imgs[0], layout.WithAnnotations(annotations))
	} else {
		err = p.AppendIndex(idx, layout.WithAnnotations(annotations))
	}
	if err != nil {
		return err
	}
	return tarDir(tmp, file)
}

// tarDir writes the directory's files into a tar archive at file
// (written to a temporary name and renamed: never half an archive).
func tarDir(dir, file string) error {
	out, err := os.CreateTemp(filepath.Dir(file), ".image-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(out.Name())
	tw := tar.NewWriter(out)
	err = filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(fi, "")
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			h.Name += "/"
		}
		h.ModTime, h.Uid, h.Gid, h.Uname, h.Gname = time.Unix(0, 0), 0, 0, "", ""
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.IsDir() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(out.Name(), file)
}

// Open reads an archive written by WriteArchive (or any tarred OCI image
// layout): it is unpacked into dir, and the layout's images are returned,
// one per platform.
func Open(file, dir string) ([]v1.Image, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		name := filepath.Clean(filepath.FromSlash(h.Name))
		if !filepath.IsLocal(name) {
			return nil, fmt.Errorf("%s: entry %q leaves the archive", file, h.Name)
		}
		dst := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(dst, 0o755)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(dst, b, 0o644)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	return images(top)
}

func images(idx v1.ImageIndex) ([]v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var out []v1.Image
	for _, d := range m.Manifests {
		switch {
		case d.MediaType.IsImage():
			img, err := idx.Image(d.Digest)
			if err != nil {
				return nil, err
			}
			out = append(out, img)
		case d.MediaType.IsIndex():
			sub, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return nil, err
			}
			imgs, err := images(sub)
			if err != nil {
				return nil, err
			}
			out = append(out, imgs...)
		}
	}
	return out, nil
}

// ExtractFile returns the content and header of path (no leading slash)
// from the image's flattened filesystem.
func ExtractFile(img v1.Image, path string) ([]byte, *tar.Header, error) {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, nil, fmt.Errorf("%s: not in the image", path)
		}
		if err != nil {
			return nil, nil, err
		}
		if strings.TrimPrefix(h.Name, "/") == path {
			b, err := io.ReadAll(tr)
			return b, h, err
		}
	}
}
