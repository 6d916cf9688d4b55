package spec

// validate checks what decoding alone cannot: names, collisions between
// declared and generated objects (a duplicate queue is one such collision),
// references, and arguments the queue type refuses. It expands the spec once
// with a problems sink, so validation and expansion can never disagree about
// what gets generated.
// It returns the builder, whose objects are the spec's expansion when no
// problem was found (see LoadExpanded).
func validate(s *Spec, p *problems) *builder {
	b := newBuilder(s, p)
	b.build()
	return b
}
