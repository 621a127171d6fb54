package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// probePaths are what the probe command asks, by kind.
var probePaths = map[string]string{"live": "/healthz", "ready": "/readyz"}

// probe is the kubelet's exec probe: it asks the running plugin, over its
// probe socket (probeSocket) inside the plugin's container, whether it is
// alive (live: /healthz) or ready (ready: /readyz), prints the plugin's
// answer and exits 0 when the answer is yes, 1 otherwise (no answer within
// --timeout included). Nothing on the network reaches that socket, so no
// client of the plugin's ports can crowd its probes out.
func probe(args []string, stdout, stderr io.Writer) error {
	f := newFlags("probe", stderr)
	timeout := f.fs.Duration("timeout", time.Second, "how long to wait for the plugin's answer")
	f.fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: nri-cpumanager probe live|ready [--config FILE] [--probe-socket PATH] [--timeout D]\n")
		f.fs.PrintDefaults()
	}
	if len(args) == 0 || probePaths[args[0]] == "" {
		if len(args) > 0 && isHelp(args[0]) {
			f.fs.Usage()
			return flag.ErrHelp
		}
		return usagef("probe: want live or ready as the first argument")
	}
	path := probePaths[args[0]]
	cfg, err := f.load(args[1:])
	if err != nil {
		return err
	}
	if cfg.ProbeSocket == "" {
		return usagef("probe: probeSocket is \"\": the plugin serves no probe socket")
	}
	code, body, err := askProbe(cfg.ProbeSocket, path, *timeout)
	if err != nil {
		return fmt.Errorf("probe %s: no answer from the plugin on %s: %w", args[0], cfg.ProbeSocket, err)
	}
	fmt.Fprint(stdout, body)
	if code != http.StatusOK {
		return fmt.Errorf("probe %s: %s answered %d", args[0], path, code)
	}
	return nil
}

// askProbe GETs path over the Unix socket within timeout and returns the
// status and the answer's first KiB.
func askProbe(socket, path string, timeout time.Duration) (int, string, error) {
	client := http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DisableKeepAlives: true,
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", socket)
			},
		},
	}
	resp, err := client.Get("http://nri-cpumanager" + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, "", err
	}
	text := string(body)
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return resp.StatusCode, text, nil
}
