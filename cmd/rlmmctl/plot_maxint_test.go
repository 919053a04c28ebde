package main

import (
	"bytes"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage"
)

// A segment may legally end at the last offset there is, math.MaxInt64:
// the plot draws it inside the picture, finds no miss where finished
// segments cover every offset, and counts 2^63 offsets where none does.
func TestPlotSegmentsEndingAtMaxInt64(t *testing.T) {
	t.Parallel()
	fin, cs := remotestorage.CopySegmentFinished, remotestorage.CopySegmentStarted
	const last = math.MaxInt64
	for _, tc := range []struct {
		name      string
		segs      []plotSegment
		misses    int
		missCount uint64
	}{
		{"covered to the end", []plotSegment{seg(0, 999, fin, E{0: 0}), seg(1000, last, fin, E{0: 1000, 1: last})}, 0, 0},
		{"one segment of every offset", []plotSegment{seg(0, last, fin, E{0: 0})}, 0, 0},
		{"a gap before the end", []plotSegment{seg(0, 999, fin, E{0: 0}), seg(2000, last, fin, E{1: 2000})}, 1, 1000},
		{"not finished, every offset", []plotSegment{seg(0, last, cs, E{0: 0})}, 1, 1 << 63},
		{"ending one before the end", []plotSegment{seg(0, last-1, fin, E{0: 0})}, 0, 0},
		{"only the last offset", []plotSegment{seg(last, last, fin, E{0: last})}, 0, 0},
		{"near the end, not finished", []plotSegment{seg(last-10, last-5, cs, E{0: last - 10}), seg(last-3, last, fin, E{0: last - 3})}, 1, 7},
	} {
		var buf bytes.Buffer
		st, err := renderPlot(&buf, "orders-0", tc.segs)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.misses, st.Misses, tc.name)
		require.Equal(t, tc.missCount, st.MissCount, tc.name)
		els := parseSVG(t, buf.Bytes())
		require.Equal(t, len(tc.segs), st.Bars+st.InRuns, tc.name)
		for _, e := range byClass(els, "outline") {
			x0, w := attrFloat(t, e, "x"), attrFloat(t, e, "width")
			require.GreaterOrEqual(t, x0, float64(plotLeft), tc.name)
			require.Greater(t, w, 0.0, tc.name)
			require.LessOrEqual(t, x0+w, float64(plotWidth-plotRight)+0.01, tc.name)
		}
		for _, e := range byClass(els, "miss") {
			x0, w := attrFloat(t, e, "x"), attrFloat(t, e, "width")
			require.GreaterOrEqual(t, x0, float64(plotLeft), tc.name)
			require.LessOrEqual(t, x0+w, float64(plotWidth-plotRight)+0.01, tc.name)
		}
	}
}
