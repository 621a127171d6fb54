package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeRuntime is a CRI RuntimeService whose Version answers with reply or
// fails with err.
type fakeRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	reply *runtimeapi.VersionResponse
	err   error
}

func (f *fakeRuntime) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return f.reply, f.err
}

// serveGRPC serves srv on a unix socket in a fresh directory until the
// test ends and returns the socket's path.
func serveGRPC(t *testing.T, srv *grpc.Server) string {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "cri.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	return socket
}

// TestCRIVersionAgainstGRPC asks grpc-go servers serving the CRI's
// generated code, as containerd does, for the runtime's version.
func TestCRIVersionAgainstGRPC(t *testing.T) {
	for _, tc := range []struct {
		name    string
		runtime *fakeRuntime // nil: the server has no RuntimeService
		want    string
		wantErr string
	}{
		{
			name:    "version",
			runtime: &fakeRuntime{reply: &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "containerd", RuntimeVersion: "v2.1.4", RuntimeApiVersion: "v1"}},
			want:    "containerd v2.1.4",
		},
		{
			name:    "an error with a message to unescape",
			runtime: &fakeRuntime{err: status.Error(codes.Unavailable, "not ready: 100% busy, é")},
			wantErr: "/runtime.v1.RuntimeService/Version: code = Unavailable desc = not ready: 100% busy, é",
		},
		{
			name:    "no RuntimeService (v1alpha2 only)",
			wantErr: "/runtime.v1.RuntimeService/Version: code = Unimplemented desc = unknown service runtime.v1.RuntimeService",
		},
		{
			name:    "a reply without a runtime's name",
			runtime: &fakeRuntime{reply: &runtimeapi.VersionResponse{Version: "0.1.0"}},
			wantErr: "runtime.v1.RuntimeService/Version: the reply names no runtime",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := grpc.NewServer()
			if tc.runtime != nil {
				runtimeapi.RegisterRuntimeServiceServer(srv, tc.runtime)
			}
			got, err := criVersion(serveGRPC(t, srv))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("criVersion: %q, error %v; want error %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("criVersion: %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestCRIVersionWithoutARuntime checks what doctor reports when nothing
// answers gRPC on the path: a file, a socket nobody listens on, an HTTP/1
// server.
func TestCRIVersionWithoutARuntime(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	closed := filepath.Join(dir, "closed.sock")
	l, err := net.Listen("unix", closed)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	http1 := filepath.Join(dir, "http1.sock")
	hl, err := net.Listen("unix", http1)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.NotFoundHandler()}
	go hs.Serve(hl)
	t.Cleanup(func() { hs.Close() })

	for _, tc := range []struct {
		name, socket, wantErr string
	}{
		{"missing", filepath.Join(dir, "missing.sock"), "no such file or directory"},
		{"a regular file", file, "not a socket"},
		{"nobody listening", closed, "connection refused"},
		{"an HTTP/1 server", http1, "/runtime.v1.RuntimeService/Version: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := criVersion(tc.socket)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("criVersion: %q, error %v; want an error with %q", got, err, tc.wantErr)
			}
		})
	}
}

// TestDecodeVersionResponse decodes VersionResponse messages, the CRI's
// own encoding and hand-made ones.
func TestDecodeVersionResponse(t *testing.T) {
	field := func(b []byte, num protowire.Number, s string) []byte {
		b = protowire.AppendTag(b, num, protowire.BytesType)
		return protowire.AppendString(b, s)
	}
	var unknown []byte
	unknown = protowire.AppendTag(unknown, 9, protowire.VarintType)
	unknown = protowire.AppendVarint(unknown, 300)
	unknown = field(unknown, 3, "v2.2.0")
	unknown = protowire.AppendTag(unknown, 10, protowire.Fixed64Type)
	unknown = protowire.AppendFixed64(unknown, 1)
	unknown = field(unknown, 2, "containerd")
	for _, tc := range []struct {
		name          string
		msg           []byte
		name_, ver    string
		wantErrSubstr string
	}{
		{"fields in order", field(field(field(nil, 1, "0.1.0"), 2, "containerd"), 3, "v2.1.4"), "containerd", "v2.1.4", ""},
		{"unknown fields and any order", unknown, "containerd", "v2.2.0", ""},
		{"no version", field(nil, 2, "cri-o"), "cri-o", "", ""},
		{"empty", nil, "", "", "the reply names no runtime"},
		{"truncated string", field(nil, 2, "containerd")[:5], "", "", "malformed reply"},
		{"truncated tag", []byte{0x80}, "", "", "malformed reply"},
		{"truncated unknown field", protowire.AppendTag(nil, 9, protowire.Fixed32Type), "", "", "malformed reply"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name, ver, err := decodeVersionResponse(tc.msg)
			if tc.wantErrSubstr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrSubstr) {
					t.Fatalf("decode: %q %q, error %v; want an error with %q", name, ver, err, tc.wantErrSubstr)
				}
				return
			}
			if err != nil || name != tc.name_ || ver != tc.ver {
				t.Fatalf("decode: %q %q, %v; want %q %q", name, ver, err, tc.name_, tc.ver)
			}
		})
	}
}

// TestGRPCMessage reads the length-prefixed message of a reply's body.
func TestGRPCMessage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		body    []byte
		want    string
		wantErr string
	}{
		{"a message", []byte{0, 0, 0, 0, 2, 'h', 'i'}, "hi", ""},
		{"an empty message", []byte{0, 0, 0, 0, 0}, "", ""},
		{"no message", nil, "", "the reply has no message"},
		{"compressed", []byte{1, 0, 0, 0, 2, 'h', 'i'}, "", "the reply is compressed"},
		{"short", []byte{0, 0, 0, 0, 3, 'h', 'i'}, "", "says 3 bytes and 2 follow"},
		{"two messages", []byte{0, 0, 0, 0, 1, 'h', 0, 0, 0, 0, 1, 'i'}, "", "says 1 bytes and 7 follow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := grpcMessage(tc.body)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("grpcMessage: %q, error %v; want an error with %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("grpcMessage: %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
