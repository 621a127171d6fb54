package harness

import (
	"fmt"
	"net/url"
	"os"
	"regexp"
	"syscall"
)

// APIServerHostPort returns the host and port the cluster's API server
// listens on (loopback), from the administrator's kubeconfig: a pod on the
// host network reaches it there (there is no kube-proxy for the
// kubernetes Service's cluster IP).
func (c *Cluster) APIServerHostPort() (host, port string, err error) {
	data, err := os.ReadFile(c.Kubeconfig)
	if err != nil {
		return "", "", fmt.Errorf("read the kubeconfig: %w", err)
	}
	m := regexp.MustCompile(`server:\s*"?([^",}\s]+)`).FindSubmatch(data)
	if m == nil {
		return "", "", fmt.Errorf("no server in %s", c.Kubeconfig)
	}
	u, err := url.Parse(string(m[1]))
	if err != nil {
		return "", "", fmt.Errorf("the kubeconfig's server: %w", err)
	}
	return u.Hostname(), u.Port(), nil
}

// FreezeAPIServer stops the API server's process (SIGSTOP): it accepts
// connections and answers nothing, as a hung or overloaded server does,
// until ThawAPIServer. Every client, the kubelet included, waits.
func (c *Cluster) FreezeAPIServer() error { return c.signal("kube-apiserver", syscall.SIGSTOP) }

// ThawAPIServer resumes the API server stopped by FreezeAPIServer.
func (c *Cluster) ThawAPIServer() error { return c.signal("kube-apiserver", syscall.SIGCONT) }

func (c *Cluster) signal(name string, sig syscall.Signal) error {
	p := c.process(name)
	if p == nil {
		return fmt.Errorf("no %s running", name)
	}
	if err := syscall.Kill(p.PID(), sig); err != nil {
		return fmt.Errorf("signal %s to %s: %w", sig, name, err)
	}
	c.logf("%s: %s", name, sig)
	return nil
}
