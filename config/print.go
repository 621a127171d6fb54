package config

import (
	"fmt"

	"sigs.k8s.io/yaml"
)

// YAML returns c as a config document with every key written, options
// included (keys sorted by name). Parse of the result gives back a Config
// equal to c.
func (c *Config) YAML() ([]byte, error) {
	out, err := yaml.Marshal(documentOf(c).v.Interface())
	if err != nil {
		return nil, fmt.Errorf("encoding config as YAML: %w", err)
	}
	return append([]byte("apiVersion: "+APIVersion+"\nkind: "+Kind+"\n"), out...), nil
}
