package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
)

// criVersion asks the CRI runtime on socket for its name and version
// (RuntimeService/Version), within doctorTimeout.
//
// The call is one unary gRPC request, written here on net/http's HTTP/2
// without TLS rather than with grpc-go and the CRI's generated code: those
// would be linked into the plugin's binary, which is also the DaemonSet's
// long-running process, for one request that only doctor makes; they were
// a quarter of the binary and 4 to 5 MiB of the plugin's resident
// memory (docs/performance.md, "Memory").
func criVersion(socket string) (string, error) {
	fi, err := os.Stat(socket)
	if err != nil {
		return "", err
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return "", fmt.Errorf("not a socket")
	}
	ctx, cancel := context.WithTimeout(context.Background(), doctorTimeout)
	defer cancel()
	// VersionRequest{version: ""} is the empty message, as the kubelet's
	// and crictl's first call sends it.
	reply, err := grpcUnary(ctx, socket, "/runtime.v1.RuntimeService/Version", nil)
	if err != nil {
		return "", err
	}
	name, version, err := decodeVersionResponse(reply)
	if err != nil {
		return "", fmt.Errorf("runtime.v1.RuntimeService/Version: %w", err)
	}
	return name + " " + version, nil
}

// maxGRPCReply bounds the reply grpcUnary reads: a VersionResponse is four
// short strings.
const maxGRPCReply = 64 << 10

// grpcUnary makes one unary gRPC call of method (/package.Service/Method)
// on the unix socket, with the encoded request message, and returns the
// encoded reply message. It speaks the gRPC wire protocol over HTTP/2 with
// prior knowledge (no TLS, as the CRI socket serves it): a length-prefixed
// message each way, the call's status in grpc-status and grpc-message,
// in the trailers or, for a call that failed before any reply, in the
// headers.
func grpcUnary(ctx context.Context, socket, method string, request []byte) ([]byte, error) {
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	transport := &http.Transport{
		Protocols: &protocols,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}
	defer transport.CloseIdleConnections()

	body := make([]byte, 5+len(request))
	binary.BigEndian.PutUint32(body[1:5], uint32(len(request)))
	copy(body[5:], request)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://localhost"+method, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	resp, err := transport.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	defer resp.Body.Close()
	if err := grpcStatus(resp.Header); err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP status %s", method, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxGRPCReply+1))
	if err != nil {
		return nil, fmt.Errorf("%s: reading the reply: %w", method, err)
	}
	if err := grpcStatus(resp.Trailer); err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	if resp.Trailer.Get("Grpc-Status") == "" {
		return nil, fmt.Errorf("%s: the reply has no grpc-status", method)
	}
	if len(data) > maxGRPCReply {
		return nil, fmt.Errorf("%s: the reply is over %d bytes", method, maxGRPCReply)
	}
	return grpcMessage(data)
}

// grpcStatus is the error a gRPC status in h says, nil when h has none or
// it is OK (0).
func grpcStatus(h http.Header) error {
	s := h.Get("Grpc-Status")
	if s == "" || s == "0" {
		return nil
	}
	code, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("malformed grpc-status %q", s)
	}
	msg := h.Get("Grpc-Message")
	if m, err := url.PathUnescape(msg); err == nil {
		msg = m
	}
	return fmt.Errorf("code = %s desc = %s", grpcCodeName(code), msg)
}

// grpcCodeNames are gRPC's status codes by number (google.rpc.Code).
var grpcCodeNames = [...]string{"OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound",
	"AlreadyExists", "PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted", "OutOfRange",
	"Unimplemented", "Internal", "Unavailable", "DataLoss", "Unauthenticated"}

// grpcCodeName names a gRPC status code, as grpc-go prints it.
func grpcCodeName(code int) string {
	if code >= 0 && code < len(grpcCodeNames) {
		return grpcCodeNames[code]
	}
	return "Code(" + strconv.Itoa(code) + ")"
}

// grpcMessage is the one uncompressed message of a unary reply's body.
func grpcMessage(data []byte) ([]byte, error) {
	if len(data) < 5 {
		return nil, errors.New("the reply has no message")
	}
	if data[0] != 0 {
		return nil, errors.New("the reply is compressed, which was not asked for")
	}
	n := binary.BigEndian.Uint32(data[1:5])
	if uint64(n) != uint64(len(data)-5) {
		return nil, fmt.Errorf("the reply's message says %d bytes and %d follow", n, len(data)-5)
	}
	return data[5:], nil
}

// decodeVersionResponse reads runtime_name (2) and runtime_version (3) of
// a CRI VersionResponse (k8s.io/cri-api's api.proto), skipping the other
// fields.
func decodeVersionResponse(b []byte) (name, version string, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", "", fmt.Errorf("malformed reply: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if typ == protowire.BytesType && (num == 2 || num == 3) {
			v, n := protowire.ConsumeString(b)
			if n < 0 {
				return "", "", fmt.Errorf("malformed reply: %w", protowire.ParseError(n))
			}
			if num == 2 {
				name = v
			} else {
				version = v
			}
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return "", "", fmt.Errorf("malformed reply: %w", protowire.ParseError(n))
		}
		b = b[n:]
	}
	if name == "" {
		return "", "", errors.New("the reply names no runtime")
	}
	return name, version, nil
}
