package main

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
)

// tenSegments: a leadership change inside segment 2, a gap 4000-4999, an
// upload overlapping segment 5 (shadowed), one still copying, one being
// deleted.
func tenSegments() []plotSegment {
	fin, cs, ds := remotestorage.CopySegmentFinished, remotestorage.CopySegmentStarted, remotestorage.DeleteSegmentStarted
	return []plotSegment{
		seg(0, 999, ds, E{0: 0}),
		seg(1000, 1999, fin, E{0: 1000}),
		seg(2000, 2999, fin, E{0: 2000, 1: 2500}),
		seg(3000, 3999, fin, E{1: 3000}),
		seg(5000, 5999, fin, E{1: 5000}),
		seg(5500, 6499, fin, E{2: 5500}), // overlaps the one above: lane 2
		seg(6500, 7499, fin, E{2: 6500}),
		seg(7500, 8499, cs, E{2: 7500}), // not finished: lookups miss here
		seg(8500, 9499, fin, E{3: 8500}),
		seg(9500, 9999, fin, E{3: 9500}),
	}
}

func TestPlotBarsMatchSegments(t *testing.T) {
	t.Parallel()
	segs := tenSegments()
	var buf bytes.Buffer
	st, err := renderPlot(&buf, "orders-0 <&>", segs)
	require.NoError(t, err)
	els := parseSVG(t, buf.Bytes())
	require.Equal(t, plotStats{Segments: 10, Bars: 10, Lanes: 2, Misses: 3, MissCount: 1000 + 1000 + 1000, Bytes: buf.Len()}, st)

	groups := byClass(els, "segment")
	require.Len(t, groups, 10, "one bar per segment")
	require.Empty(t, byClass(els, "run"), "10 segments fit: no summary")
	inner := float64(plotWidth - plotLeft - plotRight)
	x := func(off int64) float64 { return plotLeft + float64(off)/10000*inner }
	index := map[string]int{}
	for i, s := range segs {
		index[s.ID.String()] = i
	}
	seen := map[int]bool{}
	for _, g := range groups {
		i, found := index[g.attrs["data-id"]]
		require.True(t, found, "a bar for an unknown segment %s", g.attrs["data-id"])
		require.False(t, seen[i], "two bars for segment %d", i)
		seen[i] = true
		s := segs[i]
		require.Equal(t, s.Start, attrInt(t, g, "data-start"))
		require.Equal(t, s.End, attrInt(t, g, "data-end"))
		require.Equal(t, s.State.String(), g.attrs["data-state"])
		wantLane := "0"
		if i == 5 {
			wantLane = "1"
		}
		require.Equal(t, wantLane, g.attrs["data-lane"], "segment %d", i)
		var outline *svgElement
		var epochs []*svgElement
		for _, e := range els {
			if e.parent == g && e.attrs["class"] == "outline" {
				outline = e
			}
			if e.parent == g && e.attrs["class"] == "epoch" {
				epochs = append(epochs, e)
			}
		}
		require.NotNil(t, outline)
		require.InDelta(t, x(s.Start), attrFloat(t, outline, "x"), 0.01)
		require.InDelta(t, x(s.End+1)-x(s.Start), attrFloat(t, outline, "width"), 0.01)
		wantY := plotTop + (laneHeight+laneGap)*int(attrInt(t, g, "data-lane"))
		require.EqualValues(t, wantY, attrFloat(t, outline, "y"))
		require.Len(t, epochs, len(s.Epochs), "one colour per epoch of segment %d", i)
		for k, e := range epochs {
			require.Equal(t, epochColour(s.Epochs[k].Epoch), e.attrs["fill"])
			require.InDelta(t, x(s.Epochs[k].FirstOffset), attrFloat(t, e, "x"), 0.01)
		}
		switch s.State {
		case remotestorage.CopySegmentStarted:
			require.Contains(t, outline.attrs, "stroke-dasharray")
		default:
			require.NotContains(t, outline.attrs, "stroke-dasharray")
		}
	}
	// The segment spanning epochs 0 and 1 shows two colours.
	require.NotEqual(t, epochColour(0), epochColour(1))

	misses := byClass(els, "miss")
	require.Len(t, misses, 3)
	got := make([][2]int64, len(misses))
	for i, m := range misses {
		got[i] = [2]int64{attrInt(t, m, "data-first"), attrInt(t, m, "data-last")}
	}
	require.Equal(t, [][2]int64{{0, 999}, {4000, 4999}, {7500, 8499}}, got,
		"lookups miss where only a deleting or copying segment is, and in the gap")
	require.Contains(t, buf.String(), "miss 4,000–4,999")
	require.Contains(t, buf.String(), "orders-0 &lt;&amp;&gt;", "the title is escaped")
}

func tenThousandSegments() []plotSegment {
	segs := make([]plotSegment, 0, 10_000)
	for i := range int64(10_000) {
		start := i * 100
		if i >= 5000 {
			start += 777 // one gap in the middle
		}
		st := remotestorage.CopySegmentFinished
		if i >= 9990 {
			st = remotestorage.CopySegmentStarted
		}
		segs = append(segs, seg(start, start+99, st, E{remotestorage.LeaderEpoch(i / 1500): start}))
		if i%2000 == 1999 { // a retried upload over the same offsets
			segs = append(segs, seg(start, start+99, remotestorage.CopySegmentStarted, E{remotestorage.LeaderEpoch(i / 1500): start}))
		}
	}
	return segs
}

func TestPlotSummarisesTenThousand(t *testing.T) {
	t.Parallel()
	segs := tenThousandSegments()
	var buf bytes.Buffer
	st, err := renderPlot(&buf, "big-0", segs)
	require.NoError(t, err)
	els := parseSVG(t, buf.Bytes())
	t.Logf("10,005 segments: %d elements, %d bytes, %d runs, %d bars", len(els), buf.Len(), st.Runs, st.Bars)
	require.Less(t, len(els), 500, "bounded by the picture, not by the segments")
	require.Less(t, buf.Len(), 100_000)
	runs := byClass(els, "run")
	require.Len(t, runs, st.Runs)
	total := 0
	for _, r := range runs {
		total += int(attrInt(t, r, "data-count"))
		require.LessOrEqual(t, attrInt(t, r, "data-start"), attrInt(t, r, "data-end"))
	}
	require.Equal(t, len(segs), total+st.Bars, "every segment is in a bar or a run")
	require.Equal(t, len(segs), total, "at 10,000 segments every bar is narrower than 2 px")
	require.Equal(t, 2, st.Lanes, "the retried uploads stack below")
	misses := byClass(els, "miss")
	require.NotEmpty(t, misses)
	require.Contains(t, buf.String(), "miss 500,000–500,776")
	require.Contains(t, buf.String(), "segments, offsets")
}

// TestPlotRendersInChromium: a browser draws the SVG into a PNG that is not
// blank. Chromium is a test dependency (make test-deps-chromium).
func TestPlotRendersInChromium(t *testing.T) {
	t.Parallel()
	browser, err := exec.LookPath("chromium")
	require.NoError(t, err, "chromium is needed: make test-deps-chromium (apt-get install -y chromium)")
	dir := t.TempDir()
	for name, segs := range map[string][]plotSegment{"ten": tenSegments(), "tenk": tenThousandSegments()} {
		svgPath := filepath.Join(dir, name+".svg")
		pngPath := filepath.Join(dir, name+".png")
		var buf bytes.Buffer
		_, err := renderPlot(&buf, name, segs)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(svgPath, buf.Bytes(), 0o644))
		require.NoError(t, chromiumScreenshot(t, browser, svgPath, pngPath, 1400, 400))
		f, err := os.Open(pngPath)
		require.NoError(t, err)
		img, err := png.Decode(f)
		require.NoError(t, f.Close())
		require.NoError(t, err)
		require.Equal(t, 1400, img.Bounds().Dx())
		require.Equal(t, 400, img.Bounds().Dy())
		colours := map[uint32]bool{}
		var red int
		for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y += 2 {
			for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x += 2 {
				r, g, b, _ := img.At(x, y).RGBA()
				colours[(r>>8)<<16|(g>>8)<<8|b>>8] = true
				if r>>8 > 180 && g>>8 < 90 && b>>8 < 90 {
					red++
				}
			}
		}
		require.Greater(t, len(colours), 8, "%s: the PNG is (nearly) blank", name)
		require.Positive(t, red, "%s: the misses are drawn in red", name)
	}
}

// chromiumScreenshot renders svgPath with headless chromium (as root it
// needs --no-sandbox).
func chromiumScreenshot(t *testing.T, browser, svgPath, pngPath string, w, h int) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--user-data-dir="+t.TempDir(), "--screenshot="+pngPath, fmt.Sprintf("--window-size=%d,%d", w, h), "file://"+svgPath)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("chromium: %w: %s", err, out)
	}
	if _, err := os.Stat(pngPath); err != nil {
		return fmt.Errorf("chromium wrote no PNG: %w: %s", err, out)
	}
	return nil
}

func TestSegmentsPlotCommand(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	d := seedInspectData(t, dsn)
	out := filepath.Join(t.TempDir(), "orders.svg")
	r := rlmmctl(t, nil, "--database-url", dsn, "segments", "plot", "orders", "0", "-o", out)
	require.Equal(t, 0, r.code, r.output())
	require.Contains(t, r.stderr, "wrote "+out+": 4 segments (4 bars, 0 in 0 runs), 1 lanes")
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	groups := byClass(parseSVG(t, data), "segment")
	require.Len(t, groups, 4, "the segments list shows: the forgotten one is not drawn")
	for i, g := range groups {
		require.Equal(t, d.s[i+1].String(), g.attrs["data-id"])
	}
	// s[4] is still copying: lookups miss at 4000-4999.
	require.Contains(t, string(data), `data-first="4000" data-last="4999"`)

	// By topic id, to stdout: the same picture.
	r = rlmmctl(t, nil, "--database-url", dsn, "segments", "plot", kafkaTopicID(d.orders.TopicID), "0", "-o", "-")
	require.Equal(t, 0, r.code, r.output())
	require.Len(t, byClass(parseSVG(t, []byte(r.stdout)), "segment"), 4)

	r = rlmmctl(t, nil, "--database-url", dsn, "segments", "plot", "gone", "0", "-o", out+".gone")
	require.Equal(t, exitNotFound, r.code, r.output())
	_, err = os.Stat(out + ".gone")
	require.True(t, os.IsNotExist(err), "nothing written")
	for _, bad := range [][]string{{"orders", "x", "-o", out}, {"orders", "-1", "-o", out}, {"orders", "0"}, {"orders"}} {
		r = rlmmctl(t, nil, append([]string{"--database-url", dsn, "segments", "plot"}, bad...)...)
		require.Equal(t, exitUsage, r.code, "%v: %s", bad, r.output())
	}
	r = rlmmctl(t, nil, "--database-url", dsn, "segments", "plot", "nosuch", "0", "-o", out)
	require.Equal(t, exitNotFound, r.code, r.output())
	require.False(t, strings.Contains(r.stdout, "<svg"))
}
