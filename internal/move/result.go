package move

// Result counts what a pass did. It is the dlq commands' own result too:
// ops hands it on as it is and draws it; the engine leaves ResetHeaders
// and the notes of LeftBy to its callers.
type Result struct {
	Queue  string `json:"queue"`
	Target string `json:"target,omitempty"`
	// Depth is the number of ready messages when the pass started.
	Depth   int `json:"depth"`
	Scanned int `json:"scanned"`
	Moved   int `json:"moved"`
	// Left counts examined messages left in place by choice, LeftBy by note.
	Left   int            `json:"left"`
	LeftBy map[string]int `json:"left_by,omitempty"`
	// Failed counts messages chosen for a move that stayed in the source
	// because the move was not confirmed (nacked, returned, interrupted).
	Failed int `json:"failed"`
	// Unexamined counts deliveries that arrived past the end of the pass;
	// they were requeued untouched.
	Unexamined int `json:"unexamined,omitempty"`
	// Stopped says why the pass ended before examining Depth messages.
	Stopped  string   `json:"stopped,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
	// ResetHeaders names the headers the move dropped from the messages
	// it moved (replay: see ops.ReplayHeaders); every other header was
	// kept.
	ResetHeaders []string `json:"reset_headers,omitempty"`
}
