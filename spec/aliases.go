package spec

import (
	"errors"

	"go.yaml.in/yaml/v3"
)

// maxExpandedNodes bounds the nodes a document may expand to through
// aliases, so a "billion laughs" document fails fast instead of hanging.
// A spec of 1,000 queues is about 20,000 nodes.
const maxExpandedNodes = 1_000_000

// resolveAliases replaces every alias by the node it names and applies
// merge keys ("<<: *base", explicit keys win), so the strict walk below sees
// plain mappings, lists and scalars. Positions stay those of the anchored
// text, which is where a problem in it must be fixed.
func resolveAliases(n *yaml.Node, budget *int) error {
	*budget--
	if *budget < 0 {
		return errors.New("the document expands to too many nodes through aliases (more than its size allows, and at least 1000000)")
	}
	for i, c := range n.Content {
		for c.Kind == yaml.AliasNode && c.Alias != nil {
			c = c.Alias
		}
		n.Content[i] = c
		if err := resolveAliases(c, budget); err != nil {
			return err
		}
	}
	if n.Kind == yaml.MappingNode {
		n.Content = applyMerges(n.Content)
	}
	return nil
}

// applyMerges expands "<<" entries of a mapping's key/value list.
func applyMerges(kv []*yaml.Node) []*yaml.Node {
	hasMerge := false
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i].Tag == "!!merge" || (kv[i].Value == "<<" && kv[i].Style == 0) {
			hasMerge = true
		}
	}
	if !hasMerge {
		return kv
	}
	var own, merged []*yaml.Node
	explicit := map[string]bool{}
	var sources []*yaml.Node
	for i := 0; i+1 < len(kv); i += 2 {
		k, v := kv[i], kv[i+1]
		if k.Tag == "!!merge" || (k.Value == "<<" && k.Style == 0) {
			if v.Kind == yaml.SequenceNode {
				sources = append(sources, v.Content...)
			} else {
				sources = append(sources, v)
			}
			continue
		}
		explicit[k.Value] = true
		own = append(own, k, v)
	}
	for _, src := range sources {
		if src.Kind != yaml.MappingNode {
			// Left for the strict walk to report as a wrong type.
			own = append(own, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "<<", Line: src.Line, Column: src.Column}, src)
			continue
		}
		for i := 0; i+1 < len(src.Content); i += 2 {
			if !explicit[src.Content[i].Value] {
				explicit[src.Content[i].Value] = true
				merged = append(merged, src.Content[i], src.Content[i+1])
			}
		}
	}
	return append(own, merged...)
}
