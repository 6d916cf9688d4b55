package spec

// validate checks what decoding alone cannot: names, collisions between
// declared and generated objects (a duplicate queue is one such collision),
// references, and arguments the queue type refuses. It expands the spec once
// with a problems sink, so validation and expansion can never disagree about
// what gets generated.
func validate(s *Spec, p *problems) {
	newBuilder(s, p).build()
}
