package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/progress-planner/planner/internal/humanize"
	"github.com/progress-planner/planner/internal/textsafe"
	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/pkg/progress"
	"github.com/progress-planner/planner/pkg/report"
)

type forecastFlags struct {
	at         float64
	atFraction float64
	objective  string
	output     *outputFlag
	trainJob   string
	kube       kubeFlags
}

func newForecastCmd() *cobra.Command {
	var fl forecastFlags
	cmd := &cobra.Command{
		Use:   "forecast HISTORY.jsonl",
		Short: "Forecast one job from its progress history, as of a chosen time",
		Long: `Forecast reads a progress history (JSON Lines: a ProgressHistory header line,
then one trainerStatus report a line; "-" reads standard input), keeps only
the reports up to --at, and prints the planner's forecast as of that time:
progress and step rate, ETA with its interval (or why it is unknown), time
to target when a target is known, current and predicted final objective,
expected remaining improvement, plateau probability and onset, divergence
and hang flags, confidence, the fitted curve families and their weights,
and the verdict, boost and reason of the default policy.

The policy needs facts a history file does not hold; they are assumed (and
the output says so): GPUs from the header's runInfo.gpus (else 0), admitted
at the first report's t, no namespace or ClusterQueue, base priority 0, no
evictions, no previous decision.

The objective is --objective, else the header's objective, else eval_loss or
loss (minimized) when the reports carry one.

-o json and -o yaml print one object whose fields are raw seconds and
fractions (docs/forecast-json.md); -o table formats them for people.

Exit codes: 0 success, 1 bad input (the error names the line), 2 usage
error (including --trainjob, which needs the controller).`,
		Example: `  planner forecast run.jsonl
  planner forecast run.jsonl --at 3600 -o json
  planner forecast run.jsonl --at-fraction 0.5 --objective val_loss,minimize,target=3.28
  cat run.jsonl | planner forecast - -o yaml`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runForecast(cmd, args, &fl)
		},
	}
	f := cmd.Flags()
	f.Float64Var(&fl.at, "at", 0, "forecast as of this time, in seconds since run start (default: the last report)")
	f.Float64Var(&fl.atFraction, "at-fraction", 0, "forecast as of this fraction of the header's outcome.endSeconds (of the last report's t without an outcome)")
	f.StringVar(&fl.objective, "objective", "", "objective METRIC[,minimize|maximize][,target=X] (default: the header's, else eval_loss or loss)")
	fl.output = addOutputFlag(cmd, formatTable, formatJSON, formatYAML)
	f.StringVar(&fl.trainJob, "trainjob", "", "forecast a live TrainJob NAMESPACE/NAME from its ProgressForecast history (written by planner run)")
	fl.kube.addScoped(cmd, "with --trainjob: ", "")
	return cmd
}

func runForecast(cmd *cobra.Command, args []string, fl *forecastFlags) error {
	flags := cmd.Flags()
	var objFlag *progress.Objective
	if fl.objective != "" {
		o, err := progress.ParseObjective(fl.objective)
		if err != nil {
			return usageErrorf("--objective: %v", err)
		}
		objFlag = &o
	}
	atSet, fracSet := flags.Changed("at"), flags.Changed("at-fraction")
	if fl.trainJob != "" {
		if len(args) > 0 {
			return usageErrorf("--trainjob and a history file cannot be used together")
		}
		ns, name, ok := strings.Cut(fl.trainJob, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return usageErrorf("--trainjob %q: want NAMESPACE/NAME", fl.trainJob)
		}
		if atSet || fracSet {
			return usageErrorf("--trainjob forecasts as of now: --at and --at-fraction apply to history files")
		}
		rc, err := fl.kube.restConfig()
		if err != nil {
			return err
		}
		out, err := liveForecast(cmd.Context(), rc, ns, name, time.Now(), objFlag)
		if err != nil {
			return err
		}
		return writeForecast(cmd.OutOrStdout(), out, fl.output.String())
	}
	if len(args) != 1 {
		return usageErrorf("want exactly one history file (or - for standard input), got %d arguments; see planner forecast --help", len(args))
	}
	if atSet && fracSet {
		return usageErrorf("--at and --at-fraction cannot be used together")
	}
	if atSet && !(fl.at >= 0 && fl.at <= maxRunSeconds) {
		return usageErrorf("--at %v: want seconds in [0, %d] (ten years)", fl.at, maxRunSeconds)
	}
	if fracSet && !(fl.atFraction >= 0 && fl.atFraction <= 1) {
		return usageErrorf("--at-fraction %v: want a fraction in [0, 1]", fl.atFraction)
	}

	c, err := loadHistory(args[0], cmd.InOrStdin(), cutSpec{at: fl.at, frac: fl.atFraction, atSet: atSet, fracSet: fracSet})
	if err != nil {
		return err
	}
	out, err := buildForecastOutput(c, objFlag)
	if err != nil {
		return err
	}
	return writeForecast(cmd.OutOrStdout(), out, fl.output.String())
}

// writeForecast prints out in format (table, json or yaml).
func writeForecast(dst io.Writer, out *forecastOutput, format string) error {
	w := bufio.NewWriter(dst)
	var err error
	switch format {
	case "json":
		err = writeForecastJSON(w, out)
	case "yaml":
		err = writeForecastYAML(w, out)
	default:
		// Names, metrics and reasons quoting them are tenant text: the
		// terminal must show them, not obey them (textsafe).
		var b strings.Builder
		writeForecastTable(&b, out)
		_, err = w.WriteString(textsafe.Text(b.String()))
	}
	if err != nil {
		return err
	}
	return w.Flush()
}

// forecastOutput is the JSON/YAML object printed by planner forecast
// (docs/forecast-json.md). Times are seconds in the history's time base
// (since run start), durations seconds, shares fractions.
type forecastOutput struct {
	Name string `json:"name"`
	// At is the forecast instant (= Forecast.Now); AtBasis how it was chosen.
	At      float64 `json:"at"`
	AtBasis string  `json:"atBasis"`
	// ReportsRead counts the file's report lines with t <= At (before
	// validation and heartbeat collapse; Forecast.Reports counts the
	// accepted, distinct ones).
	ReportsRead  int               `json:"reportsRead"`
	Objective    objectiveOutput   `json:"objective"`
	Forecast     forecast.Forecast `json:"forecast"`
	Decision     preempt.Decision  `json:"decision"`
	AssumedFacts assumedFacts      `json:"assumedFacts"`
	// Rejections counts refused reports and values by reason.
	Rejections map[string]int `json:"rejections"`
}

type objectiveOutput struct {
	progress.Objective
	// Source: "flag" (--objective), "header" or "default" (eval_loss/loss).
	Source string `json:"source"`
}

// assumedFacts are the preempt.Facts the decision was made with. A history
// file knows none of them for sure; they are assumed as Note says.
type assumedFacts struct {
	preempt.Facts
	// GPUsFrom: "runInfo.gpus", or "unknown" (GPUs 0).
	GPUsFrom string `json:"gpusFrom"`
	Note     string `json:"note"`
}

const assumedFactsNote = "assumed from the history file, not observed on a cluster: gpus from runInfo.gpus (else 0), " +
	"admittedAt = the first report's t, no namespace or ClusterQueue, base priority 0, no evictions, no previous decision"

// buildForecastOutput forecasts a history as of its cut from the reports
// with t <= cut.At only, and decides under the default policy. objFlag,
// when not nil, overrides the objective. It is pure: nothing after the cut
// can change its result.
func buildForecastOutput(c *historyCut, objFlag *progress.Objective) (*forecastOutput, error) {
	hd, cut, h, read := &c.Header, c.Cut, c.H, c.Read
	now := cut.At

	if h.Len() == 0 && read > 0 {
		// Say why, not the downstream symptom ("no objective").
		return nil, fmt.Errorf("%s: all %d reports up to t=%gs rejected: %s", hd.Name, read, now, rejectionSummary(h))
	}
	var obj progress.Objective
	src := ""
	if objFlag != nil {
		obj, src = *objFlag, "flag"
	} else if o, ok := hd.ObjectiveSpec(); ok {
		obj, src = o, "header"
	} else if o, ok := progress.DefaultObjective(h); ok {
		obj, src = o, "default"
	} else {
		return nil, fmt.Errorf("%s: no objective: the header names none and the reports up to t=%gs carry neither eval_loss nor loss; "+
			"pass --objective METRIC[,minimize|maximize][,target=X]", hd.Name, now)
	}

	fc := forecast.Fit(h, obj, now, forecast.DefaultSettings())

	facts := preempt.Facts{}
	gpusFrom := "unknown"
	if g, ok := hd.RunInfoFloat("gpus"); ok {
		if !(g >= 0 && g <= report.MaxGPUs) { // before the conversion to int
			return nil, fmt.Errorf("%s: header: runInfo.gpus %v: must be in [0, %d]", hd.Name, g, report.MaxGPUs)
		}
		facts.GPUs, gpusFrom = int(math.Round(g)), "runInfo.gpus"
	}
	if read > 0 {
		first := c.First
		facts.AdmittedAt = &first
	}
	d := preempt.Decide(fc, facts, preempt.Decision{}, preempt.DefaultPolicy())

	rej := map[string]int{}
	for k, v := range h.Rejections() {
		rej[string(k)] = v
	}
	return &forecastOutput{
		Name:         hd.Name,
		At:           now,
		AtBasis:      cut.Basis,
		ReportsRead:  read,
		Objective:    objectiveOutput{Objective: obj, Source: src},
		Forecast:     fc,
		Decision:     d,
		AssumedFacts: assumedFacts{Facts: facts, GPUsFrom: gpusFrom, Note: assumedFactsNote},
		Rejections:   rej,
	}, nil
}

// rejectionSummary is "progress-range 20 (e.g. progressPercentage 150),
// ...": each reason with its count, most frequent first, and the latest
// value refused for it.
func rejectionSummary(h *progress.History) string {
	counts := h.Rejections()
	example := map[progress.RejectReason]progress.Rejection{}
	for _, r := range h.RecentRejections() {
		example[r.Reason] = r
	}
	reasons := slices.Collect(maps.Keys(counts))
	slices.SortFunc(reasons, func(a, b progress.RejectReason) int { return cmp.Or(counts[b]-counts[a], cmp.Compare(a, b)) })
	var parts []string
	for _, r := range reasons {
		part := fmt.Sprintf("%s %d", r, counts[r])
		if e, ok := example[r]; ok {
			part += " (e.g. " + strings.TrimSpace(e.Field+" "+e.Detail) + ")"
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return "no reason recorded"
	}
	return strings.Join(parts, ", ")
}

func writeForecastJSON(w io.Writer, out *forecastOutput) error {
	// Encode to memory first: a failed encoding must print nothing.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // reasons contain "<" and "→"; keep them readable
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("encoding the forecast (a planner bug: please report it): %w", err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

func writeForecastYAML(w io.Writer, out *forecastOutput) error {
	b, err := yaml.Marshal(out)
	if err != nil {
		return fmt.Errorf("encoding the forecast (a planner bug: please report it): %w", err)
	}
	_, err = w.Write(b)
	return err
}

// writeForecastTable prints the forecast for people: durations like 2h10m,
// shares in percent. Write errors surface at the caller's Flush.
func writeForecastTable(w io.Writer, out *forecastOutput) {
	f := &out.Forecast
	iv := humanize.Percent(forecast.DefaultSettings().Interval) + " interval"
	line := func(label, format string, args ...any) {
		fmt.Fprintf(w, "%-17s %s\n", label, fmt.Sprintf(format, args...))
	}

	fmt.Fprintf(w, "%s at t=%s (%s since run start, %s); %d reports read\n",
		textsafe.Line(out.Name), humanize.Number(out.At), humanize.Duration(out.At), atBasisText(out.AtBasis), out.ReportsRead)

	obj := out.Objective
	target := "no target"
	if obj.Target != nil {
		target = "target " + humanize.Number(*obj.Target)
	}
	line("Objective", "%s, %s, %s (from the %s)", textsafe.Line(obj.Metric), obj.Direction, target, map[string]string{
		"flag": "--objective flag", "header": "header", "default": "default: eval_loss, else loss"}[obj.Source])

	// Progress and pace.
	var prog []string
	switch {
	case f.Progress != nil && f.Step != nil && f.TotalSteps != nil:
		prog = append(prog, fmt.Sprintf("%s (step %s of %s)", humanize.Percent(*f.Progress), humanize.Number(*f.Step), humanize.Number(*f.TotalSteps)))
	case f.Progress != nil:
		prog = append(prog, humanize.Percent(*f.Progress))
	case f.Step != nil:
		prog = append(prog, fmt.Sprintf("counter at %s (no total)", humanize.Number(*f.Step)))
	default:
		prog = append(prog, "unknown (no progress counter)")
	}
	if f.StepRate != nil {
		unit := " steps/s"
		if f.TotalSteps == nil {
			unit = " per second"
		}
		prog = append(prog, humanize.Number(*f.StepRate)+unit)
	}
	line("Progress", "%s", strings.Join(prog, ", "))
	rep := fmt.Sprintf("%d accepted, %d segment(s), last progress %s ago", f.Reports, f.Segments, humanize.Duration(f.SinceProgress))
	if f.ReportInterval != nil {
		rep += fmt.Sprintf(", median interval %s", humanize.Duration(*f.ReportInterval))
	}
	line("Reports", "%s", rep)

	// ETA and time to target.
	line("ETA", "%s", etaText(f.ETA, out.At, iv))
	if f.ReportedETA != nil {
		line("Reported ETA", "%s (the job's own claim, untrusted)", humanize.Duration(*f.ReportedETA))
	}
	if tt := f.TimeToTarget; tt != nil {
		if tt.Known && tt.Basis == f.ETA.Basis && tt.Value == f.ETA.Value && tt.Value > 0 {
			line("Time to target", "as the ETA (the job stops at its target)")
		} else {
			line("Time to target", "%s", etaText(*tt, out.At, iv))
		}
	}

	// Objective.
	if f.Current != nil && f.Best != nil {
		line("Objective now", "%s (best %s, %d distinct observations)", humanize.Number(*f.Current), humanize.Number(*f.Best), f.ObjectivePts)
	} else {
		line("Objective now", "no observation of %s", obj.Metric)
	}
	if pf := f.PredictedFinal; pf.Known {
		line("Predicted final", "%s (%s %s to %s, basis %s)", humanize.Number(pf.Value), iv, humanize.Number(pf.Lo), humanize.Number(pf.Hi), pf.Basis)
	} else {
		line("Predicted final", "unknown: %s", pf.Why)
	}
	if f.RemainingImprovement != nil {
		s := humanize.Number(*f.RemainingImprovement)
		if f.RelativeRemaining != nil {
			s += fmt.Sprintf(" (%s of the gain so far)", humanize.Percent(*f.RelativeRemaining))
		}
		line("Remaining gain", "%s", s)
	} else {
		line("Remaining gain", "unknown")
	}

	// Plateau, divergence, hang, integrity.
	pl := fmt.Sprintf("probability %s", humanize.Percent(f.PlateauProbability))
	if f.Plateaued {
		pl += ", plateaued"
		if f.PlateauOnset != nil {
			pl += fmt.Sprintf(" since t=%s (%s ago)", humanize.Number(*f.PlateauOnset), humanize.Duration(f.Now-*f.PlateauOnset))
		}
	} else {
		pl += ", not plateaued"
	}
	if f.PlateauReason != "" {
		pl += ": " + f.PlateauReason
	}
	line("Plateau", "%s", pl)
	if f.Diverging {
		s := "yes: " + f.DivergenceReason
		if f.NonFinite {
			s += " (non-finite)"
		}
		line("Diverging", "%s", s)
	} else {
		line("Diverging", "no")
	}
	if f.Hung {
		line("Hung", "yes: %s", f.HangReason)
	} else {
		line("Hung", "no")
	}
	if len(f.Integrity.Issues) > 0 {
		line("Integrity", "%s", strings.Join(f.Integrity.Issues, "; "))
	} else {
		line("Integrity", "no findings")
	}
	line("Confidence", "%s", humanize.Percent(f.Confidence))
	if len(f.Models) > 0 {
		// People need the families that matter; JSON carries them all.
		var ms []string
		rest := 0
		for _, m := range f.Models {
			if m.Weight >= 0.01 {
				ms = append(ms, fmt.Sprintf("%s %s", m.Family, humanize.Percent(m.Weight)))
			} else {
				rest++
			}
		}
		if rest > 0 {
			ms = append(ms, fmt.Sprintf("%d more below 1%%", rest))
		}
		line("Models", "%s", strings.Join(ms, ", "))
	} else {
		line("Models", "none fitted")
	}
	for i, n := range f.Notes {
		label := ""
		if i == 0 {
			label = "Notes"
		}
		line(label, "%s", n)
	}

	// Decision.
	d := &out.Decision
	v := fmt.Sprintf("%s, boost %s (mode %s", d.Verdict, humanize.Boost(d.Boost), d.Mode)
	if d.AdvisedBoost != d.Boost {
		v += ", advised " + humanize.Boost(d.AdvisedBoost)
	}
	if d.HeldBy != "" {
		v += ", held by " + string(d.HeldBy)
	}
	v += ")"
	if d.AdvisedAction != preempt.ActionNone && d.AdvisedAction != "" {
		v += ", action " + string(d.AdvisedAction)
	}
	line("Verdict", "%s under the default policy", v)
	line("Reason", "%s", d.Reason)
	fa := &out.AssumedFacts
	gpus := fmt.Sprintf("%d GPUs (runInfo.gpus)", fa.GPUs)
	if fa.GPUsFrom != "runInfo.gpus" {
		gpus = "0 GPUs (runInfo.gpus unknown)"
	}
	adm := "not admitted (no report yet)"
	if fa.AdmittedAt != nil {
		adm = fmt.Sprintf("admitted at t=%s (first report)", humanize.Number(*fa.AdmittedAt))
	}
	line("Facts (assumed)", "%s, %s, no namespace or ClusterQueue, base priority 0, no evictions, no previous decision", gpus, adm)

	if len(out.Rejections) == 0 {
		line("Rejections", "none")
	} else {
		keys := make([]string, 0, len(out.Rejections))
		for k := range out.Rejections {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		rs := make([]string, len(keys))
		for i, k := range keys {
			rs[i] = fmt.Sprintf("%s %d", k, out.Rejections[k])
		}
		line("Rejections", "%s", strings.Join(rs, ", "))
	}
}

func atBasisText(b string) string {
	switch b {
	case "at":
		return "--at"
	case "fraction-of-end":
		return "--at-fraction of outcome.endSeconds"
	case "fraction-of-last-report":
		return "--at-fraction of the last report's t"
	default:
		return "the last report"
	}
}

// etaText renders a remaining-time estimate made at now.
func etaText(e forecast.Estimate, now float64, iv string) string {
	if !e.Known {
		if e.Why == "" {
			return "unknown"
		}
		return "unknown: " + e.Why
	}
	if e.Value == 0 && e.Why != "" {
		return e.Why
	}
	s := fmt.Sprintf("%s (%s %s to %s, basis %s); ends at t≈%s", humanize.Duration(e.Value), iv, humanize.Duration(e.Lo), humanize.Duration(e.Hi), e.Basis, humanize.Duration(now+e.Value))
	if e.Why != "" {
		s += "; " + e.Why
	}
	return s
}
