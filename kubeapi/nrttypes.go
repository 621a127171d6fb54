package kubeapi

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// The NodeResourceTopology API, topology.node.k8s.io/v1alpha2, as the
// module github.com/k8stopologyawareschedwg/noderesourcetopology-api
// (v0.1.2) defines it: the fields the plugin writes, in that module's JSON
// (a test decodes them into the module's types strictly). The plugin does
// not link the module: its types pull in gogo protobuf, a megabyte of
// resident memory for five structs.

// NRTGroupVersion is the API's group and version.
const NRTGroupVersion = "topology.node.k8s.io/v1alpha2"

// NodeResourceTopology describes a node's resources by zone.
type NodeResourceTopology struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// TopologyPolicies is deprecated, still read by older schedulers.
	TopologyPolicies []string `json:"topologyPolicies,omitempty"`
	Zones            []Zone   `json:"zones"`
	Attributes       []Attr   `json:"attributes,omitempty"`
}

// Zone is a resource topology zone: here a NUMA node.
type Zone struct {
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	Parent     string         `json:"parent,omitempty"`
	Costs      []Cost         `json:"costs,omitempty"`
	Attributes []Attr         `json:"attributes,omitempty"`
	Resources  []ResourceInfo `json:"resources,omitempty"`
}

// ResourceInfo is one resource of a zone.
type ResourceInfo struct {
	Name        string            `json:"name"`
	Capacity    resource.Quantity `json:"capacity"`
	Allocatable resource.Quantity `json:"allocatable"`
	Available   resource.Quantity `json:"available"`
}

// Cost is the distance to another zone.
type Cost struct {
	Name  string `json:"name"`
	Value int64  `json:"value"`
}

// Attr is a name and a value.
type Attr struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// TopologyClient reads and writes NodeResourceTopology objects. Errors of
// the API server are its *errors.StatusError (apierrors.IsNotFound works).
type TopologyClient interface {
	Get(ctx context.Context, name string) (*NodeResourceTopology, error)
	Create(ctx context.Context, nrt *NodeResourceTopology) (*NodeResourceTopology, error)
	Update(ctx context.Context, nrt *NodeResourceTopology) (*NodeResourceTopology, error)
	Delete(ctx context.Context, name string) error
}

// restTopology is TopologyClient over REST, in JSON.
type restTopology struct{ c rest.Interface }

const nrtResource = "noderesourcetopologies"

func (r restTopology) Get(ctx context.Context, name string) (*NodeResourceTopology, error) {
	return decodeNRT(r.c.Get().Resource(nrtResource).Name(name).Do(ctx).Raw())
}

func (r restTopology) Create(ctx context.Context, nrt *NodeResourceTopology) (*NodeResourceTopology, error) {
	body, err := encodeNRT(nrt)
	if err != nil {
		return nil, err
	}
	return decodeNRT(r.c.Post().Resource(nrtResource).SetHeader("Content-Type", "application/json").Body(body).Do(ctx).Raw())
}

func (r restTopology) Update(ctx context.Context, nrt *NodeResourceTopology) (*NodeResourceTopology, error) {
	body, err := encodeNRT(nrt)
	if err != nil {
		return nil, err
	}
	return decodeNRT(r.c.Put().Resource(nrtResource).Name(nrt.Name).SetHeader("Content-Type", "application/json").Body(body).Do(ctx).Raw())
}

func (r restTopology) Delete(ctx context.Context, name string) error {
	return r.c.Delete().Resource(nrtResource).Name(name).Do(ctx).Error()
}

func encodeNRT(nrt *NodeResourceTopology) ([]byte, error) {
	out := *nrt
	out.APIVersion, out.Kind = NRTGroupVersion, "NodeResourceTopology"
	data, err := json.Marshal(&out)
	if err != nil {
		return nil, fmt.Errorf("encoding NodeResourceTopology %s: %w", nrt.Name, err)
	}
	return data, nil
}

func decodeNRT(data []byte, err error) (*NodeResourceTopology, error) {
	if err != nil {
		return nil, err
	}
	out := &NodeResourceTopology{}
	if err := json.Unmarshal(data, out); err != nil {
		return nil, fmt.Errorf("decoding a NodeResourceTopology: %w", err)
	}
	return out, nil
}
