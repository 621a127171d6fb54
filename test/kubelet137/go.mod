module github.com/nri-cpumanager/nri-cpumanager/test/kubelet137

go 1.26.0

require (
	github.com/go-logr/logr v1.4.4
	github.com/nri-cpumanager/nri-cpumanager v0.0.0
	k8s.io/apiserver v0.37.2
	k8s.io/component-base v0.37.2
	k8s.io/kubernetes v1.37.2
	k8s.io/utils v0.0.0-20261023123148-ca04ba58ecab
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/blang/semver/v4 v4.0.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/davecgh/go-spew v1.1.2-0.20180830191138-d8f796af33cc // indirect
	github.com/fsnotify/fsnotify v1.9.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	github.com/sirupsen/logrus v1.10.2 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
	go.opentelemetry.io/otel v1.45.0 // indirect
	go.opentelemetry.io/otel/trace v1.45.0 // indirect
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	golang.org/x/sys v0.49.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
	k8s.io/apiextensions-apiserver v0.0.0 // indirect
	k8s.io/apimachinery v0.37.2 // indirect
	k8s.io/client-go v0.37.2 // indirect
	k8s.io/controller-manager v0.37.2 // indirect
	k8s.io/klog/v2 v2.140.0 // indirect
)

replace github.com/nri-cpumanager/nri-cpumanager => ../..

replace k8s.io/api => k8s.io/api v0.37.2

replace k8s.io/apiextensions-apiserver => k8s.io/apiextensions-apiserver v0.37.2

replace k8s.io/apimachinery => k8s.io/apimachinery v0.37.2

replace k8s.io/apiserver => k8s.io/apiserver v0.37.2

replace k8s.io/cli-runtime => k8s.io/cli-runtime v0.37.2

replace k8s.io/client-go => k8s.io/client-go v0.37.2

replace k8s.io/cloud-provider => k8s.io/cloud-provider v0.37.2

replace k8s.io/cluster-bootstrap => k8s.io/cluster-bootstrap v0.37.2

replace k8s.io/code-generator => k8s.io/code-generator v0.37.2

replace k8s.io/component-base => k8s.io/component-base v0.37.2

replace k8s.io/component-helpers => k8s.io/component-helpers v0.37.2

replace k8s.io/controller-manager => k8s.io/controller-manager v0.37.2

replace k8s.io/cri-api => k8s.io/cri-api v0.37.2

replace k8s.io/cri-client => k8s.io/cri-client v0.37.2

replace k8s.io/cri-streaming => k8s.io/cri-streaming v0.37.2

replace k8s.io/csi-translation-lib => k8s.io/csi-translation-lib v0.37.2

replace k8s.io/dynamic-resource-allocation => k8s.io/dynamic-resource-allocation v0.37.2

replace k8s.io/endpointslice => k8s.io/endpointslice v0.37.2

replace k8s.io/externaljwt => k8s.io/externaljwt v0.37.2

replace k8s.io/kms => k8s.io/kms v0.37.2

replace k8s.io/kube-aggregator => k8s.io/kube-aggregator v0.37.2

replace k8s.io/kube-controller-manager => k8s.io/kube-controller-manager v0.37.2

replace k8s.io/kube-proxy => k8s.io/kube-proxy v0.37.2

replace k8s.io/kube-scheduler => k8s.io/kube-scheduler v0.37.2

replace k8s.io/kubectl => k8s.io/kubectl v0.37.2

replace k8s.io/kubelet => k8s.io/kubelet v0.37.2

replace k8s.io/metrics => k8s.io/metrics v0.37.2

replace k8s.io/mount-utils => k8s.io/mount-utils v0.37.2

replace k8s.io/pod-security-admission => k8s.io/pod-security-admission v0.37.2

replace k8s.io/sample-apiserver => k8s.io/sample-apiserver v0.37.2

replace k8s.io/sample-cli-plugin => k8s.io/sample-cli-plugin v0.37.2

replace k8s.io/sample-controller => k8s.io/sample-controller v0.37.2

replace k8s.io/streaming => k8s.io/streaming v0.37.2
