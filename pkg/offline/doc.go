// Package offline is the offline forecast pipeline that planner forecast,
// planner report and the backtest share: a history file streamed up to
// its cut (the one cut rule, progress.AtOrBefore), fitted
// (forecast.Fit), and decided under facts assumed from the file
// (preempt.Decide with AssumedFacts), with the objective from the flag,
// the header or the default. It is pure apart from reading the file:
// nothing after the cut can change its result.
package offline
