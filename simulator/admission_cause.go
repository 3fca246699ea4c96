package simulator

// The causes of an admission, in the words planner explain prints.
const (
	CauseFree     = "GPUs already free"                      // admitted without anything ending first
	CauseFinished = "a running job finished"                 // the last freeing event was a completion
	CauseStopped  = "a stalled job was stopped"              // a deactivation (the planner's opt-in stop)
	CauseYield    = "a job yielded or was preempted"         // a preemption by another job
	CausePreempts = "it preempts a lower-priority admission" // the job itself preempted
)

// AdmissionCause reads a run's event log (Options.RecordEvents) for what
// freed the GPUs job was admitted into at t, having arrived at arrival:
// its own preemptions first, else the last event that freed GPUs in its
// ClusterQueue, else in any queue (borrowing from the cohort).
func AdmissionCause(recs []Record, job, queue string, arrival, t float64) string {
	own, any := "", ""
	for _, r := range recs {
		if r.T > t {
			break
		}
		if r.T < arrival {
			continue
		}
		c := ""
		switch {
		case r.Type == "preempt" && r.By == job:
			return CausePreempts
		case r.Type == "preempt":
			c = CauseYield
		case r.Type == "deactivate":
			c = CauseStopped
		case r.Type == "finish":
			c = CauseFinished
		default:
			continue
		}
		any = c
		if r.Queue == queue {
			own = c
		}
	}
	switch {
	case own != "":
		return own
	case any != "":
		return any
	}
	return CauseFree
}
