package apply

// Newer reports whether p replaces last in a progress report: changes run
// concurrently, so a report may arrive after a later one; planning again
// (a vhost that appeared meanwhile) starts over.
func (p Progress) Newer(last Progress) bool {
	return p.Done >= last.Done || p.Step == StepPlanning
}
