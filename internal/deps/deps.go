package deps
import (
 _ "github.com/containerd/nri/pkg/stub"
 _ "github.com/containerd/nri/pkg/adaptation"
 _ "github.com/containerd/ttrpc"
 _ "github.com/opencontainers/runtime-spec/specs-go"
 _ "k8s.io/utils/cpuset"
 _ "github.com/sirupsen/logrus"
 _ "github.com/prometheus/client_golang/prometheus"
 _ "github.com/prometheus/client_golang/prometheus/promhttp"
 _ "github.com/prometheus/client_golang/prometheus/testutil"
 _ "k8s.io/cri-api/pkg/apis/runtime/v1"
 _ "google.golang.org/grpc"
 _ "sigs.k8s.io/yaml"
 _ "golang.org/x/sys/unix"
)
