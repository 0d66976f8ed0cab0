package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The chart bench --plot draws: the latency histogram and the throughput
// over the run.

// writePlot draws the latency histogram and the throughput over time side by
// side, as PNG or SVG by the file's extension.
func writePlot(file string, r *benchReport) error {
	hist, err := latencyPlot(r)
	if err != nil {
		return err
	}
	tput, err := throughputPlot(r)
	if err != nil {
		return err
	}
	format := strings.ToLower(strings.TrimPrefix(filepath.Ext(file), "."))
	c, err := draw.NewFormattedCanvas(11*vg.Inch, 4.5*vg.Inch, format)
	if err != nil {
		return err
	}
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 6, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
	plots := [][]*plot.Plot{{hist, tput}}
	canvases := plot.Align(plots, tiles, dc)
	hist.Draw(canvases[0][0])
	tput.Draw(canvases[0][1])
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

var (
	barColor  = color.RGBA{R: 70, G: 130, B: 180, A: 255}
	p50Color  = color.RGBA{R: 46, G: 139, B: 87, A: 255}
	p99Color  = color.RGBA{R: 205, G: 92, B: 92, A: 255}
	lineColor = color.RGBA{R: 25, G: 25, B: 112, A: 255}
)

// latencyPlot is the histogram of cycle latencies on a log scale, with p50
// and p99 marked.
func latencyPlot(r *benchReport) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("cycle latency (%s cycles)", num(r.Cycles))
	p.Y.Label.Text = "cycles"
	p.Y.Tick.Marker = shortTicks{}
	bins := logBins(r.hist, 60)
	if len(bins) == 0 {
		// No cycle finished: an empty panel. A log scale over no data
		// would span -1 to 1, which gonum refuses with a panic.
		p.X.Label.Text = "latency (ms): no cycle finished"
		return p, nil
	}
	p.X.Label.Text = "latency (ms, log scale)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	h := &plotter.Histogram{Bins: bins, FillColor: barColor, LineStyle: plotter.DefaultLineStyle}
	h.LineStyle.Width = vg.Points(0.5)
	p.Add(h)
	var top float64
	for _, b := range bins {
		top = max(top, b.Weight)
	}
	for _, m := range []struct {
		name string
		ms   float64
		c    color.Color
	}{{"p50", r.P50MS, p50Color}, {"p99", r.P99MS, p99Color}} {
		if m.ms <= 0 {
			continue
		}
		l, err := plotter.NewLine(plotter.XYs{{X: m.ms, Y: 0}, {X: m.ms, Y: top * 1.02}})
		if err != nil {
			return nil, err
		}
		l.Color, l.Width, l.Dashes = m.c, vg.Points(1.5), []vg.Length{vg.Points(4), vg.Points(2)}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s %s", m.name, dur(time.Duration(m.ms*float64(time.Millisecond)))), l)
	}
	// Room above the bars for the legend.
	p.Y.Max = top * 1.3
	p.Legend.Top = true
	return p, nil
}

// logBins spreads the histogram's counts over n bins of equal width on a log
// scale, in milliseconds.
func logBins(h *hdrhistogram.Histogram, n int) []plotter.HistogramBin {
	if h == nil || h.TotalCount() == 0 {
		return nil
	}
	lo := math.Max(float64(h.Min()), 1) / 1000
	hi := float64(h.Max()) / 1000
	if hi <= lo*1.01 {
		hi = lo * 1.5
	}
	lo, hi = lo*0.95, hi*1.05
	step := math.Log(hi/lo) / float64(n)
	bins := make([]plotter.HistogramBin, n)
	for i := range bins {
		bins[i].Min = lo * math.Exp(step*float64(i))
		bins[i].Max = lo * math.Exp(step*float64(i+1))
	}
	for _, b := range h.Distribution() {
		if b.Count == 0 {
			continue
		}
		ms := (float64(b.From) + float64(b.To)) / 2 / 1000
		i := int(math.Log(ms/lo) / step)
		bins[max(0, min(i, n-1))].Weight += float64(b.Count)
	}
	return bins
}

// throughputPlot is cycles per second over the run.
func throughputPlot(r *benchReport) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("throughput (mean %s cycles/s)", num(int64(math.Round(r.CyclesPerSec))))
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = "cycles/s"
	p.Y.Min = 0
	pts := make(plotter.XYs, 0, len(r.throughput))
	var from time.Duration
	for _, s := range r.throughput {
		// Each sample at the middle of its interval.
		pts = append(pts, plotter.XY{X: (from + s.at).Seconds() / 2, Y: s.perSec})
		from = s.at
	}
	if len(pts) == 0 {
		return p, nil
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return nil, err
	}
	l.Color, l.Width = lineColor, vg.Points(1.5)
	p.Add(l, plotter.NewGrid())
	p.Y.Tick.Marker = shortTicks{}
	return p, nil
}

// shortTicks are plot's default ticks labelled 50k, 1.2M rather than
// 50000.00.
type shortTicks struct{}

func (shortTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label == "" {
			continue
		}
		v, unit := ts[i].Value, ""
		switch {
		case math.Abs(v) >= 1e6:
			v, unit = v/1e6, "M"
		case math.Abs(v) >= 1e3:
			v, unit = v/1e3, "k"
		}
		ts[i].Label = strconv.FormatFloat(v, 'f', -1, 64) + unit
	}
	return ts
}
