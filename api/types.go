package api

import "time"

// filterRequest is the body of the one call.
type filterRequest struct {
	Candidates []string `json:"candidates"`
	Record     string   `json:"record"`
	Limit      int64    `json:"limit"`
	OnError    string   `json:"on_error"`

	unseen []string // the answer's unseen candidates, kept for the next call (filterRequests)
	// resp is the answer: held here, it is not a heap object of its own
	// each call (sendJSON takes it as an interface).
	resp filterResponse
}

// filterResponse is the answer of the one call.
type filterResponse struct {
	Unseen    []string `json:"unseen"`
	SeenCount int      `json:"seen_count"`
	Recorded  int      `json:"recorded"`
	Degraded  bool     `json:"degraded,omitempty"`
	Saturated bool     `json:"saturated,omitempty"`
	replayed  bool     // read back from the journal (eviction.Result.Replayed)
	born      time.Time
}
