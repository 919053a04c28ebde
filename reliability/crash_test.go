package reliability_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgcluster"
	"github.com/krabka/remotestorage/internal/testwait"
)

// crashOutcome is what one crash run measured.
type crashOutcome struct {
	report
	outageDials int64         // connection attempts while the server was down or recovering
	down        time.Duration // from the crash until the server accepted connections again
	recovered   time.Duration // from then until every broker had a write succeed
}

// crashRun kills the server with pg_ctl stop -m immediate while six writers
// on three brokers are writing, starts it again (crash recovery), lets the
// writers go on until every broker has written again, and verifies every
// write. The writers keep calling while the server is down, pausing 20 ms
// after each failure as a broker would.
func crashRun(t *testing.T, c *pgcluster.Cluster, dsn string) crashOutcome {
	t.Helper()
	bs := brokers(t, dsn, 3, brokerConfig{maxConns: 4})
	parts := []rs.TopicIDPartition{newTP("crash", 0), newTP("crash", 1), newTP("crash", 2)}
	w := newWorkload(bs, parts, 6)
	w.start()
	defer func() {
		if !w.stopped() {
			w.finish()
		}
	}()
	w.waitAcked(t, 500)

	ctx, cancel := context.WithTimeout(context.Background(), 2*testwait.Timeout(t))
	defer cancel()
	dialsBefore := totalDials(bs)
	crashed := time.Now()
	require.NoError(t, c.Shutdown(ctx, pgcluster.Immediate))
	// Down for a while: every call fails, every connection attempt too.
	time.Sleep(500 * time.Millisecond)
	require.NoError(t, c.Startup(ctx))
	back := w.markBack()
	out := crashOutcome{outageDials: totalDials(bs) - dialsBefore, down: back.Sub(crashed)}
	out.recovered = w.waitRecovered(t)
	w.waitAcked(t, 200)
	w.finish()

	requireWorkloadErrors(t, w)
	out.report = verify(t, dsn, w)
	t.Logf("crash: %s; server down %v (crash recovery included), connection attempts meanwhile %d, every broker writing again %v after",
		out.report, out.down.Round(time.Millisecond), out.outageDials, out.recovered.Round(time.Millisecond))
	return out
}

// TestCrashDurability: no acknowledged write is lost to a crash, and no
// write is half applied.
func TestCrashDurability(t *testing.T) {
	c, dsn := ownCluster(t, pgcluster.Options{})
	out := crashRun(t, c, dsn)
	requireAccounted(t, out.report)
	require.Positive(t, out.failed, "the crash failed no write: it did not happen mid-load")
	require.LessOrEqual(t, out.outageDials, dialBound(3, 4, out.down))
}

// TestCrashControlCatchesLoss runs the same crash against a server that
// acknowledges commits before they are durable (synchronous_commit=off,
// fsync=off): the check must see acknowledged writes lost, or it could not
// catch a store that loses them. Such a server loses only the commits on
// the last, partial page of WAL not yet written (the WAL writer writes full
// pages at once), a handful at most, so one crash may lose none: up to three
// crashes.
func TestCrashControlCatchesLoss(t *testing.T) {
	c, dsn := ownCluster(t, pgcluster.Options{ExtraConf: map[string]string{"synchronous_commit": "off", "fsync": "off"}})
	var lost []int
	for len(lost) < 3 {
		out := crashRun(t, c, dsn)
		lost = append(lost, out.lost)
		if out.lost > 0 {
			t.Logf("control: crash %d lost %d acknowledged writes, and verify said so; first problems: %v", len(lost), out.lost, out.problems[:min(3, len(out.problems))])
			return
		}
	}
	t.Fatalf("with synchronous_commit=off, %d crashes lost no acknowledged write that verify saw (lost %v): could it catch a loss?", len(lost), lost)
}
