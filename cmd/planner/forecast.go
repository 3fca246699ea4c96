package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/progress-planner/planner/internal/humanize"
	"github.com/progress-planner/planner/internal/textsafe"
	"github.com/progress-planner/planner/pkg/forecast"
	"github.com/progress-planner/planner/pkg/offline"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/pkg/progress"
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

	c, err := offline.Load(args[0], cmd.InOrStdin(), offline.CutSpec{At: fl.at, Frac: fl.atFraction, AtSet: atSet, FracSet: fracSet})
	if err != nil {
		return err
	}
	out, err := offline.Forecast(c, objFlag)
	if err != nil {
		return err
	}
	return writeForecast(cmd.OutOrStdout(), out, fl.output.String())
}

// writeForecast prints out in format (table, json or yaml).
func writeForecast(dst io.Writer, out *offline.Output, format string) error {
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

func writeForecastJSON(w io.Writer, out *offline.Output) error {
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

func writeForecastYAML(w io.Writer, out *offline.Output) error {
	b, err := yaml.Marshal(out)
	if err != nil {
		return fmt.Errorf("encoding the forecast (a planner bug: please report it): %w", err)
	}
	_, err = w.Write(b)
	return err
}

// writeForecastTable prints the forecast for people: durations like 2h10m,
// shares in percent. Write errors surface at the caller's Flush.
// forecastTable writes planner forecast's table: one labelled line per
// fact, section by section (forecastSections).
type forecastTable struct {
	w   io.Writer
	out *offline.Output
	f   *forecast.Forecast
	iv  string // "80% interval"
}

func (t *forecastTable) line(label, format string, args ...any) {
	fmt.Fprintf(t.w, "%-17s %s\n", label, fmt.Sprintf(format, args...))
}

// forecastSections are the table's sections, in print order.
var forecastSections = [...]func(*forecastTable){
	(*forecastTable).cut, (*forecastTable).progress, (*forecastTable).eta, (*forecastTable).objective,
	(*forecastTable).detectors, (*forecastTable).models, (*forecastTable).decision, (*forecastTable).facts,
}

func writeForecastTable(w io.Writer, out *offline.Output) {
	t := &forecastTable{w: w, out: out, f: &out.Forecast, iv: humanize.Percent(forecast.DefaultSettings().Interval) + " interval"}
	for _, section := range forecastSections {
		section(t)
	}
}

// cut: which history, as of when, and the objective.
func (t *forecastTable) cut() {
	fmt.Fprintf(t.w, "%s at t=%s (%s since run start, %s); %d reports read\n",
		textsafe.Line(t.out.Name), humanize.Number(t.out.At), humanize.Duration(t.out.At), atBasisText(t.out.AtBasis), t.out.ReportsRead)

	obj := t.out.Objective
	target := "no target"
	if obj.Target != nil {
		target = "target " + humanize.Number(*obj.Target)
	}
	t.line("Objective", "%s, %s, %s (from the %s)", textsafe.Line(obj.Metric), obj.Direction, target, map[string]string{
		"flag": "--objective flag", "header": "header", "default": "default: eval_loss, else loss"}[obj.Source])
}

// progress: progress, pace and the reports behind them.
func (t *forecastTable) progress() {
	f := t.f
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
	t.line("Progress", "%s", strings.Join(prog, ", "))
	rep := fmt.Sprintf("%d accepted, %d segment(s), last progress %s ago", f.Reports, f.Segments, humanize.Duration(f.SinceProgress))
	if f.ReportInterval != nil {
		rep += fmt.Sprintf(", median interval %s", humanize.Duration(*f.ReportInterval))
	}
	t.line("Reports", "%s", rep)
}

// eta: the planner's ETA, the job's claim and the time to target.
func (t *forecastTable) eta() {
	f := t.f
	t.line("ETA", "%s", etaText(f.ETA, t.out.At, t.iv))
	if f.ReportedETA != nil {
		t.line("Reported ETA", "%s (the job's own claim, untrusted)", humanize.Duration(*f.ReportedETA))
	}
	if tt := f.TimeToTarget; tt != nil {
		if tt.Known && tt.Basis == f.ETA.Basis && tt.Value == f.ETA.Value && tt.Value > 0 {
			t.line("Time to target", "as the ETA (the job stops at its target)")
		} else {
			t.line("Time to target", "%s", etaText(*tt, t.out.At, t.iv))
		}
	}
}

// objective: the objective now, predicted and still to gain.
func (t *forecastTable) objective() {
	f, obj := t.f, t.out.Objective
	if f.Current != nil && f.Best != nil {
		t.line("Objective now", "%s (best %s, %d distinct observations)", humanize.Number(*f.Current), humanize.Number(*f.Best), f.ObjectivePts)
	} else {
		t.line("Objective now", "no observation of %s", obj.Metric)
	}
	if pf := f.PredictedFinal; pf.Known {
		t.line("Predicted final", "%s (%s %s to %s, basis %s)", humanize.Number(pf.Value), t.iv, humanize.Number(pf.Lo), humanize.Number(pf.Hi), pf.Basis)
	} else {
		t.line("Predicted final", "unknown: %s", pf.Why)
	}
	if f.RemainingImprovement != nil {
		s := humanize.Number(*f.RemainingImprovement)
		if f.RelativeRemaining != nil {
			s += fmt.Sprintf(" (%s of the gain so far)", humanize.Percent(*f.RelativeRemaining))
		}
		t.line("Remaining gain", "%s", s)
	} else {
		t.line("Remaining gain", "unknown")
	}
}

// detectors: plateau, divergence, hang, integrity.
func (t *forecastTable) detectors() {
	f := t.f
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
	if f.PlateauRelease != "" {
		pl += "; releases a Plateaued verdict: " + f.PlateauRelease
	}
	t.line("Plateau", "%s", pl)
	if f.Diverging {
		s := "yes: " + f.DivergenceReason
		if f.NonFinite {
			s += " (non-finite)"
		}
		t.line("Diverging", "%s", s)
	} else {
		t.line("Diverging", "no")
	}
	if f.Hung {
		t.line("Hung", "yes: %s", f.HangReason)
	} else {
		t.line("Hung", "no")
	}
	if len(f.Integrity.Issues) > 0 {
		t.line("Integrity", "%s", strings.Join(f.Integrity.Issues, "; "))
	} else {
		t.line("Integrity", "no findings")
	}
}

// models: confidence, the curve families that matter, notes.
func (t *forecastTable) models() {
	f := t.f
	t.line("Confidence", "%s", humanize.Percent(f.Confidence))
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
		t.line("Models", "%s", strings.Join(ms, ", "))
	} else {
		t.line("Models", "none fitted")
	}
	for i, n := range f.Notes {
		label := ""
		if i == 0 {
			label = "Notes"
		}
		t.line(label, "%s", n)
	}
}

// decision: the verdict and reason under the default policy.
func (t *forecastTable) decision() {
	d := &t.out.Decision
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
	t.line("Verdict", "%s under the default policy", v)
	t.line("Reason", "%s", d.Reason)
}

// facts: the assumed facts and the rejections.
func (t *forecastTable) facts() {
	fa := &t.out.AssumedFacts
	gpus := fmt.Sprintf("%d GPUs (runInfo.gpus)", fa.GPUs)
	if fa.GPUsFrom != "runInfo.gpus" {
		gpus = "0 GPUs (runInfo.gpus unknown)"
	}
	adm := "not admitted (no report yet)"
	if fa.AdmittedAt != nil {
		adm = fmt.Sprintf("admitted at t=%s (first report)", humanize.Number(*fa.AdmittedAt))
	}
	t.line("Facts (assumed)", "%s, %s, no namespace or ClusterQueue, base priority 0, no evictions, no previous decision", gpus, adm)

	if len(t.out.Rejections) == 0 {
		t.line("Rejections", "none")
	} else {
		keys := make([]string, 0, len(t.out.Rejections))
		for k := range t.out.Rejections {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		rs := make([]string, len(keys))
		for i, k := range keys {
			rs[i] = fmt.Sprintf("%s %d", k, t.out.Rejections[k])
		}
		t.line("Rejections", "%s", strings.Join(rs, ", "))
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
