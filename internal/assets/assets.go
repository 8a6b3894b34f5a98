package assets

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"
)

// Policy is how long a browser may keep a Set's files.
type Policy int

const (
	// Versioned files are served under prefix/{version}/{file}, the version
	// a content hash of all of them: that version is cached for a year,
	// immutable. Another version (a page from an instance running other
	// code, during a rolling deploy) gets this process's file, uncached.
	Versioned Policy = iota + 1
	// Revalidated files are served under prefix/{file} and revalidated on
	// every use (no-cache).
	Revalidated
)

// File is one file of a Set.
type File struct {
	Body        []byte
	ContentType string
}

// Options are a Set's policy and the headers of its answers.
type Options struct {
	Policy Policy
	// Header is set on every file served (its security headers).
	Header http.Header
	// Gzip compresses a file, on its first request, for a client that
	// takes gzip (and says Vary: Accept-Encoding to every client).
	Gzip bool
	// NotFound answers a name that is not a file of the Set; nil: 404 with
	// {"error":{"code":"not_found","message":"not found"}}.
	NotFound gin.HandlerFunc
}

// Set is files served by name with one policy.
type Set struct {
	files   map[string]file
	version string
	o       Options
}

type file struct {
	File
	gzipped func() []byte
}

// New makes a Set of files (by name) served as o says.
func New(files map[string]File, o Options) *Set {
	if o.Policy != Versioned && o.Policy != Revalidated {
		panic(fmt.Sprintf("assets: no cache policy %d", o.Policy))
	}
	s := &Set{files: make(map[string]file, len(files)), o: o}
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(files)) { // the version is stable
		f := files[name]
		h.Write([]byte(name))
		h.Write(f.Body)
		s.files[name] = file{File: f, gzipped: sync.OnceValue(func() []byte { return gzipBytes(f.Body) })}
	}
	s.version = hex.EncodeToString(h.Sum(nil))[:12]
	return s
}

// ReadDir reads the files of dir in fsys, but for those named in skip and
// the directories, each with the Content-Type types gives its extension
// ("" for none); a file whose extension types lacks is an error.
func ReadDir(fsys fs.FS, dir string, types map[string]string, skip ...string) (map[string]File, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	files := map[string]File{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || slices.Contains(skip, name) {
			continue
		}
		contentType, ok := types[path.Ext(name)]
		if !ok {
			return nil, fmt.Errorf("%s/%s: no Content-Type for %q", dir, name, path.Ext(name))
		}
		body, err := fs.ReadFile(fsys, dir+"/"+name)
		if err != nil {
			return nil, err
		}
		files[name] = File{Body: body, ContentType: contentType}
	}
	return files, nil
}

// Version is the content hash of all the files: the {version} of a
// Versioned Set's URLs.
func (s *Set) Version() string { return s.version }

// Serve answers GET prefix/{file} (Revalidated) or prefix/{version}/{file}
// (Versioned), the route's parameters named file and version.
func (s *Set) Serve(c *gin.Context) {
	f, ok := s.files[c.Param("file")]
	if !ok {
		if s.o.NotFound != nil {
			s.o.NotFound(c)
			return
		}
		c.JSON(http.StatusNotFound, gin.H{"error": gin.H{"code": "not_found", "message": "not found"}})
		return
	}
	h := c.Writer.Header()
	for k, v := range s.o.Header {
		h[k] = slices.Clone(v)
	}
	if s.o.Policy == Versioned && c.Param("version") == s.version {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	body := f.Body
	if s.o.Gzip {
		h.Set("Vary", "Accept-Encoding")
		if acceptsGzip(c.Request.Header.Get("Accept-Encoding")) {
			h.Set("Content-Encoding", "gzip")
			body = f.gzipped()
		}
	}
	c.Data(http.StatusOK, f.ContentType, body)
}

func gzipBytes(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(b) // writing to a bytes.Buffer does not fail
	_ = zw.Close()
	return buf.Bytes()
}

// acceptsGzip reports whether an Accept-Encoding header takes gzip (and does
// not refuse it with q=0).
func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			continue
		}
		q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}
