package main

// plot_render.go: the SVG of `rlmmctl segments plot` (plot.go), drawn from
// the partition's segments.

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/krabka/remotestorage"
)

// run is a summary of consecutive narrow segments of one lane with the
// same state and (first) epoch.
type plotRun struct {
	lane     int
	state    remotestorage.RemoteLogSegmentState
	colour   int32
	first    int64
	last     int64
	count    int
	epochsLo int32
	epochsHi int32
	x0, x1   float64
}

// renderPlot writes the SVG of segs (in list order) to w.
func renderPlot(w io.Writer, title string, segs []plotSegment) (plotStats, error) {
	var st plotStats
	var b bytes.Buffer
	st.Segments = len(segs)
	inner := float64(plotWidth - plotLeft - plotRight)
	var lo, hi int64
	if len(segs) > 0 {
		lo, hi = segs[0].Start, segs[0].End
		for _, s := range segs {
			lo, hi = min(lo, s.Start), max(hi, s.End)
		}
	}
	// Positions in float64: a segment may end at math.MaxInt64, where
	// hi - lo + 1 and End + 1 overflow.
	span := float64(hi-lo) + 1
	x := func(off int64) float64 { return plotLeft + float64(off-lo)/span*inner }
	xAfter := func(last int64) float64 { return plotLeft + (float64(last-lo)+1)/span*inner } // x(last + 1)
	lanes := assignLanes(segs)
	nLanes := 1
	for _, l := range lanes {
		nLanes = max(nLanes, l+1)
	}
	st.Lanes = nLanes
	lanesBottom := plotTop + nLanes*(laneHeight+laneGap)
	missTop := lanesBottom + 4
	axisY := missTop + missBandPx + 6
	epochsSeen := map[int32]bool{}
	for _, s := range segs {
		for _, e := range s.Epochs {
			epochsSeen[e.Epoch] = true
		}
	}
	epochs := make([]int32, 0, len(epochsSeen))
	for e := range epochsSeen {
		epochs = append(epochs, e)
	}
	slices.Sort(epochs)
	legendY := axisY + axisPx
	height := legendY + 3*legendRowPx + 10

	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">
<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="2.5" height="6" fill="#222" fill-opacity="0.55"/></pattern></defs>
<rect width="100%%" height="100%%" fill="#fff"/>
`, plotWidth, height, plotWidth, height)
	misses := lookupMisses(segs)
	st.Misses = len(misses)
	for _, m := range misses {
		st.MissCount += uint64(m.last-m.first) + 1
	}
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="16" font-weight="bold">%s</text>
<text x="%d" y="42" fill="#444">%s segments, offsets %s–%s, %d leader epochs; %d offset ranges (%s offsets) where lookups miss</text>
`, plotLeft, html.EscapeString(title), plotLeft, commas(int64(len(segs))), commas(lo), commas(hi), len(epochs), len(misses), commas(st.MissCount))
	for l := 0; l < nLanes; l++ {
		y := plotTop + l*(laneHeight+laneGap)
		label := fmt.Sprintf("lane %d", l+1)
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end" fill="#666" font-size="10">%s</text>
`, plotLeft-6, y+laneHeight/2+4, label)
	}
	if nLanes > 1 {
		fmt.Fprintf(&b, `<text x="%d" y="42" text-anchor="end" fill="#666" font-size="10">lanes 2+: uploads overlapping a segment above (shadowed or retried)</text>
`, plotWidth-plotRight)
	}

	// Bars and runs.
	var cur *plotRun
	flush := func() {
		if cur == nil {
			return
		}
		y := plotTop + cur.lane*(laneHeight+laneGap)
		op, stroke := stateStyle(cur.state)
		epochText := fmt.Sprintf("epoch %d", cur.epochsLo)
		if cur.epochsHi != cur.epochsLo {
			epochText = fmt.Sprintf("epochs %d–%d", cur.epochsLo, cur.epochsHi)
		}
		wpx := max(cur.x1-cur.x0, 1)
		fmt.Fprintf(&b, `<rect class="run" data-count="%d" data-start="%d" data-end="%d" data-state="%s" x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" fill-opacity="%s" %s><title>%s segments, offsets %s–%s, %s, %s</title></rect>
`, cur.count, cur.first, cur.last, cur.state, cur.x0, y, wpx, laneHeight, epochColour(cur.colour), op, stroke,
			commas(int64(cur.count)), commas(cur.first), commas(cur.last), epochText, stateShort(cur.state))
		if cur.state == remotestorage.DeleteSegmentStarted {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="url(#hatch)"/>
`, cur.x0, y, wpx, laneHeight)
		}
		if wpx >= 90 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" font-size="10" fill="#111">%s segs</text>
`, (cur.x0+cur.x1)/2, y+laneHeight/2+4, commas(int64(cur.count)))
		}
		st.Runs++
		st.InRuns += cur.count
		cur = nil
	}
	// Runs are per lane: walk each lane in order.
	order := make([]int, len(segs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return lanes[order[i]] < lanes[order[j]] })
	for _, i := range order {
		s := segs[i]
		lane := lanes[i]
		x0, x1 := x(s.Start), xAfter(s.End)
		first, last := s.Epochs[0].Epoch, s.Epochs[len(s.Epochs)-1].Epoch
		if x1-x0 < minBarPx {
			if cur != nil && cur.lane == lane && cur.state == s.State && cur.colour == first && x0-cur.x1 < 1 {
				cur.x1, cur.last, cur.count = max(cur.x1, x1), max(cur.last, s.End), cur.count+1
				cur.epochsLo, cur.epochsHi = min(cur.epochsLo, first), max(cur.epochsHi, last)
				continue
			}
			flush()
			cur = &plotRun{lane: lane, state: s.State, colour: first, first: s.Start, last: s.End, count: 1,
				epochsLo: first, epochsHi: last, x0: x0, x1: x1}
			continue
		}
		flush()
		y := plotTop + lane*(laneHeight+laneGap)
		op, stroke := stateStyle(s.State)
		epochText := make([]string, len(s.Epochs))
		for k, e := range s.Epochs {
			epochText[k] = fmt.Sprintf("epoch %d: %s–%s", e.Epoch, commas(e.FirstOffset), commas(e.LastOffset))
		}
		fmt.Fprintf(&b, `<g class="segment" data-id="%s" data-start="%d" data-end="%d" data-state="%s" data-lane="%d"><title>%s: offsets %s–%s, %s; %s</title>
`, s.ID, s.Start, s.End, s.State, lane, s.ID, commas(s.Start), commas(s.End), stateShort(s.State), strings.Join(epochText, ", "))
		for _, e := range s.Epochs {
			ex0, ex1 := x(e.FirstOffset), xAfter(e.LastOffset)
			fmt.Fprintf(&b, `<rect class="epoch" data-epoch="%d" x="%.2f" y="%d" width="%.2f" height="%d" fill="%s" fill-opacity="%s"/>
`, e.Epoch, ex0, y, ex1-ex0, laneHeight, epochColour(e.Epoch), op)
		}
		if s.State == remotestorage.DeleteSegmentStarted {
			fmt.Fprintf(&b, `<rect x="%.2f" y="%d" width="%.2f" height="%d" fill="url(#hatch)"/>
`, x0, y, x1-x0, laneHeight)
		}
		fmt.Fprintf(&b, `<rect class="outline" x="%.2f" y="%d" width="%.2f" height="%d" fill="none" %s/>
`, x0, y, x1-x0, laneHeight, stroke)
		if x1-x0 >= 70 {
			label := commas(s.Start) + "–" + commas(s.End)
			if x1-x0 < 7*float64(len(label)) {
				label = commas(s.Start)
			}
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" font-size="10" fill="#111">%s</text>
`, (x0+x1)/2, y+laneHeight/2+4, label)
		}
		b.WriteString("</g>\n")
		st.Bars++
	}
	flush()

	// Where lookups miss: a red band under the lanes, marks merged when they
	// fall within a pixel of each other, labels for the widest ones.
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end" fill="#b00" font-size="10">misses</text>
`, plotLeft-6, missTop+missBandPx/2+4)
	type mark struct {
		x0, x1 float64
		n      int
		first  int64
		last   int64
	}
	var marks []mark
	for _, m := range misses {
		x0, x1 := x(m.first), xAfter(m.last)
		if k := len(marks) - 1; k >= 0 && x0-marks[k].x1 < 1 {
			marks[k].x1, marks[k].n, marks[k].last = x1, marks[k].n+1, m.last
			continue
		}
		marks = append(marks, mark{x0, x1, 1, m.first, m.last})
	}
	bySize := make([]int, len(marks))
	for i := range bySize {
		bySize[i] = i
	}
	sort.SliceStable(bySize, func(i, j int) bool {
		return marks[bySize[i]].last-marks[bySize[i]].first > marks[bySize[j]].last-marks[bySize[j]].first
	})
	labelled := map[int]bool{}
	for _, i := range bySize[:min(len(bySize), 8)] {
		labelled[i] = true
	}
	var labelsRight []float64
	for i, m := range marks {
		what := fmt.Sprintf("lookups miss offsets %s–%s", commas(m.first), commas(m.last))
		if m.n > 1 {
			what = fmt.Sprintf("%d ranges where lookups miss, within offsets %s–%s", m.n, commas(m.first), commas(m.last))
		}
		fmt.Fprintf(&b, `<rect class="miss" data-first="%d" data-last="%d" data-ranges="%d" x="%.2f" y="%d" width="%.2f" height="%d" fill="#d62728" fill-opacity="0.8"><title>%s</title></rect>
<rect x="%.2f" y="%d" width="%.2f" height="%d" fill="#d62728" fill-opacity="0.08"/>
`, m.first, m.last, m.n, m.x0, missTop, max(m.x1-m.x0, 1.5), missBandPx, what, m.x0, plotTop, max(m.x1-m.x0, 1.5), lanesBottom-plotTop)
		if labelled[i] {
			label := "miss " + commas(m.first) + "–" + commas(m.last)
			if m.first == m.last {
				label = "miss " + commas(m.first)
			}
			wLabel := 6.0 * float64(len(label))
			// Centred on the mark, but inside the plot.
			cx := min(max((m.x0+m.x1)/2, plotLeft+wLabel/2), plotWidth-plotRight-wLabel/2)
			clash := false
			for _, r := range labelsRight {
				if math.Abs(r-cx) < wLabel {
					clash = true
				}
			}
			if !clash {
				labelsRight = append(labelsRight, cx)
				fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" font-size="10" fill="#b00" stroke="#fff" stroke-width="3" paint-order="stroke">%s</text>
`, cx, missTop+missBandPx/2+4, label)
			}
		}
	}

	// The offset axis.
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#222"/>
`, plotLeft, axisY, plotWidth-plotRight, axisY)
	step := niceStep(span, 8)
	// Ticks at the multiples of step from lo up to hi + 1, the axis' end
	// (written t - 1 <= hi), none past math.MaxInt64.
	first := lo
	if r := lo % step; r != 0 {
		first = lo - r + step
		if lo-r > math.MaxInt64-step {
			first = -1 // no multiple of step left: no tick
		}
	}
	for t := first; t >= 0 && t-1 <= hi; t += step {
		tx := x(t)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#222"/><text x="%.1f" y="%d" text-anchor="middle">%s</text>
`, tx, axisY, tx, axisY+5, tx, axisY+18, commas(t))
		if t > math.MaxInt64-step {
			break
		}
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="#444">offset</text>
`, plotLeft+int(inner/2), axisY+34)

	// The legend: epochs, then states.
	lx := float64(plotLeft)
	fmt.Fprintf(&b, `<text x="%.0f" y="%d" font-weight="bold">leader epoch</text>
`, lx, legendY+12)
	lx += 95
	for i, e := range epochs {
		if i == 12 {
			fmt.Fprintf(&b, `<text x="%.0f" y="%d">… %d more</text>
`, lx, legendY+12, len(epochs)-12)
			break
		}
		fmt.Fprintf(&b, `<rect x="%.0f" y="%d" width="14" height="14" fill="%s"/><text x="%.0f" y="%d">%d</text>
`, lx, legendY+1, epochColour(e), lx+18, legendY+12, e)
		lx += 50
	}
	ly := legendY + legendRowPx
	lx = float64(plotLeft)
	fmt.Fprintf(&b, `<text x="%.0f" y="%d" font-weight="bold">state</text>
`, lx, ly+12)
	lx += 95
	for _, s := range []remotestorage.RemoteLogSegmentState{remotestorage.CopySegmentFinished, remotestorage.CopySegmentStarted, remotestorage.DeleteSegmentStarted} {
		op, stroke := stateStyle(s)
		fmt.Fprintf(&b, `<rect x="%.0f" y="%d" width="28" height="14" fill="#888" fill-opacity="%s" %s/>`, lx, ly+1, op, stroke)
		if s == remotestorage.DeleteSegmentStarted {
			fmt.Fprintf(&b, `<rect x="%.0f" y="%d" width="28" height="14" fill="url(#hatch)"/>`, lx, ly+1)
		}
		fmt.Fprintf(&b, `<text x="%.0f" y="%d">%s</text>
`, lx+34, ly+12, s)
		lx += 250
	}
	fmt.Fprintf(&b, `<rect x="%.0f" y="%d" width="28" height="14" fill="#d62728" fill-opacity="0.8"/><text x="%.0f" y="%d">lookups miss (no finished segment)</text>
`, lx, ly+1, lx+34, ly+12)
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#666" font-size="10">bars narrower than %.0f px are summarised as runs of segments (hover for counts, offsets and epochs)</text>
`, plotLeft, ly+legendRowPx+12, minBarPx)
	b.WriteString("</svg>\n")
	st.Bytes = b.Len()
	_, err := w.Write(b.Bytes())
	return st, err
}

// niceStep is a tick step of 1, 2 or 5 times a power of ten giving at most
// about n ticks over span.
func niceStep(span float64, n int) int64 {
	if span <= 0 {
		return 1
	}
	raw := span / float64(n)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return max(int64(min(m*p, 1e18)), 1)
		}
	}
	return max(int64(min(10*p, 1e18)), 1)
}
