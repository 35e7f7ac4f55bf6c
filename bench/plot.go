package bench

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Plot files WritePlots writes.
const (
	PlotRate   = "calls_per_s.png"
	PlotP99    = "p99.png"
	PlotMemory = "memory_per_user.png"
)

// WritePlots writes the report's PNG plots into dir: calls/s at saturation,
// p99 at the open-loop rate and memory per user, each against users, one
// line per system. It returns the files written, leaving out a plot no
// result has values for: none, and no error, when every system failed or
// stopped (the run's failures say why).
func (r *Report) WritePlots(dir string) ([]string, error) {
	specs := []struct {
		file, title, ylabel string
		logY                bool
		value               func(Result) float64
	}{
		{PlotRate, "Calls/s at saturation", "calls/s", false, func(x Result) float64 { return x.Saturation.Rate }},
		{PlotP99, fmt.Sprintf("p99 latency at %.0f%% of saturation", 100*r.OpenFrac), "p99 (ms)", true,
			func(x Result) float64 { return float64(x.Open.Latency.P99) / 1e6 }},
		{PlotMemory, fmt.Sprintf("Memory per user (%d items/user)", r.Fill), "bytes/user", true,
			func(x Result) float64 { return x.MemPerUser }},
	}
	var files []string
	for _, s := range specs {
		path := filepath.Join(dir, s.file)
		err := r.plot(path, s.title, s.ylabel, s.logY, s.value)
		if errors.Is(err, errNothingToPlot) {
			continue // e.g. no throughput in a memory-only run
		}
		if err != nil {
			return files, fmt.Errorf("%s: %w", s.file, err)
		}
		files = append(files, path)
	}
	return files, nil
}

// errNothingToPlot: no result has a value for the plot.
var errNothingToPlot = fmt.Errorf("%w: nothing to plot", ErrBadConfig)

func (r *Report) plot(path, title, ylabel string, logY bool, value func(Result) float64) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "users"
	p.Y.Label.Text = ylabel
	p.X.Scale = plot.LogScale{}
	var ticks []plot.Tick
	for _, x := range r.Results {
		if !slices.ContainsFunc(ticks, func(t plot.Tick) bool { return t.Value == float64(x.Users) }) {
			ticks = append(ticks, plot.Tick{Value: float64(x.Users), Label: formatUsers(x.Users)})
		}
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	var systems []string
	minU, maxU := 0, 0
	minY, maxY := 0.0, 0.0
	for _, x := range r.Results {
		if !slices.Contains(systems, x.System) {
			systems = append(systems, x.System)
		}
	}
	var args []any
	for _, sys := range systems {
		var pts plotter.XYs
		for _, x := range r.Results {
			if x.System != sys || x.Stopped != "" {
				continue
			}
			v := value(x)
			if v <= 0 {
				continue
			}
			pts = append(pts, plotter.XY{X: float64(x.Users), Y: v})
			if minU == 0 || x.Users < minU {
				minU = x.Users
			}
			maxU = max(maxU, x.Users)
			if minY == 0 || v < minY {
				minY = v
			}
			maxY = max(maxY, v)
		}
		if len(pts) > 0 {
			slices.SortFunc(pts, func(a, b plotter.XY) int { return int(a.X - b.X) })
			args = append(args, sys, pts)
		}
	}
	if len(args) == 0 {
		return errNothingToPlot
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return err
	}
	// Explicit ranges: a log axis needs min < max even for one user count.
	p.X.Min, p.X.Max = float64(minU)/2, float64(maxU)*2
	if logY {
		p.Y.Min, p.Y.Max = minY/2, maxY*2
	} else {
		p.Y.Min, p.Y.Max = 0, maxY*1.15
	}
	p.Legend.Top = true
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}
