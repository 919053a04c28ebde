package bench_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/testwait"
	pb "github.com/krabka/remotestorage/proto/remotestorage/v1"
)

// BenchmarkResident is the memory of rlmmd run as the Kafka plugin's
// embedded child: the binary the jar carries (kafka/embed-rlmmd.sh, this
// machine's architecture), started as the plugin starts it (unix socket,
// --stop-on-stdin-eof, no metrics), assigned 100 partitions that hold the
// live set, every one loaded and CaughtUp, then 20,000 lookups at one
// caller to reach the collector's steady state. It reports the child's
// VmRSS, RssAnon and RssFile from /proc/PID/status, and the lookups' p99,
// for each live set, GOGC (the plugin's embedded.gc.percent), and with the
// binary's pages kept or released (embedded.release.binary.pages; then it
// measures once rlmmd logged the release after the loads).
//
//	go test -run '^$' -bench 'Resident' -benchtime 1x -timeout 30m ./bench
func BenchmarkResident(b *testing.B) {
	bin := embeddedBinary(b)
	for _, live := range []int{0, 40_000, 400_000} {
		dsn, tps := liveSet(b, live)
		for _, gogc := range []int{100, 25} {
			for _, release := range []bool{false, true} {
				b.Run(fmt.Sprintf("live=%d/gogc=%d/release=%t", live, gogc, release), func(b *testing.B) {
					for b.Loop() {
						measureResident(b, bin, dsn, tps, live, gogc, release)
					}
				})
			}
		}
	}
}

// embeddedBinary builds rlmmd as the plugin's jar carries it.
func embeddedBinary(b *testing.B) string {
	out := b.TempDir()
	cmd := exec.Command("../kafka/embed-rlmmd.sh", out, "0.0.0", runtime.GOARCH)
	cmd.Stderr = os.Stderr
	require.NoError(b, cmd.Run(), "kafka/embed-rlmmd.sh")
	return filepath.Join(out, "io/github/krabka/remotestorage/kafka/rlmmd", "linux-"+runtime.GOARCH, "rlmmd")
}

// liveSet writes live finished segments spread over 100 partitions (one
// leader epoch each, as the Kafka bench's topic has) into a new database.
func liveSet(b *testing.B, live int) (string, []*pb.TopicIdPartition) {
	const partitions = 100
	ctx := context.Background()
	dsn := pgtest.NewDatabase(b)
	admin, err := pgxpool.New(ctx, dsn)
	require.NoError(b, err)
	defer admin.Close()
	topic := uuid.New()
	_, err = admin.Exec(ctx, `
INSERT INTO rlmm_partitions (topic_id, partition, topic, max_segment_span)
SELECT $1, p, 'resident', 99 FROM generate_series(0, $2::int - 1) p`, topic, partitions)
	require.NoError(b, err)
	per := live / partitions
	_, err = admin.Exec(ctx, `
INSERT INTO rlmm_segments (topic_id, partition, segment_id, topic, start_offset, end_offset, max_timestamp_ms,
    broker_id, event_timestamp_ms, segment_size_bytes, state, txn_index_empty, epochs, epoch_start_offsets,
    added_version, finished_version, last_version, last_xid)
SELECT $1, p, gen_random_uuid(), 'resident', i * 100, i * 100 + 99, i, 1, 0, 1000, 1, true,
    ARRAY[0], ARRAY[i * 100]::bigint[], 2 * i + 1, 2 * i + 2, 2 * i + 2, pg_current_xact_id()
FROM generate_series(0, $2::int - 1) p, generate_series(0, $3::int - 1) i`, topic, partitions, per)
	require.NoError(b, err)
	advanceVersions(b, admin, int64(2*per))
	_, err = admin.Exec(ctx, "VACUUM ANALYZE rlmm_partitions, rlmm_segments")
	require.NoError(b, err)
	tps := make([]*pb.TopicIdPartition, 0, partitions)
	if live > 0 {
		for p := range partitions {
			tps = append(tps, &pb.TopicIdPartition{TopicId: topic[:], Topic: "resident", Partition: int32(p)})
		}
	}
	return dsn, tps
}

func measureResident(b *testing.B, bin, dsn string, tps []*pb.TopicIdPartition, live, gogc int, release bool) {
	ctx := context.Background()
	sock := filepath.Join(b.TempDir(), "rlmmd.sock")
	args := []string{"--listen", "unix:" + sock, "--metrics-listen", "", "--stop-on-stdin-eof"}
	if release {
		args = append(args, "--release-binary-pages")
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn, "GOGC="+strconv.Itoa(gogc))
	stderr, err := cmd.StderrPipe()
	require.NoError(b, err)
	stdin, err := cmd.StdinPipe()
	require.NoError(b, err)
	require.NoError(b, cmd.Start())
	// Its warnings and errors are shown; the releases are counted.
	var releases atomic.Int32
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			switch line := sc.Text(); {
			case strings.Contains(line, "released the binary's pages"):
				releases.Add(1)
			case !strings.Contains(line, "level=INFO"):
				fmt.Fprintln(os.Stderr, line)
			}
		}
	}()
	defer func() {
		_ = stdin.Close() // the child stops at its end, as it does when the broker dies
		_ = cmd.Wait()
	}()
	conn, err := grpc.NewClient("unix:"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(b, err)
	defer func() { _ = conn.Close() }()
	c := pb.NewRemoteLogMetadataServiceClient(conn)
	probeID := uuid.New()
	probe := &pb.TopicIdPartition{TopicId: probeID[:], Topic: "probe"}
	testwait.Until(b, "rlmmd serving", func() bool {
		_, err := c.CaughtUp(ctx, &pb.CaughtUpRequest{TopicIdPartition: probe})
		return err == nil
	})
	if len(tps) > 0 {
		_, err = c.OnPartitionLeadershipChanges(ctx, &pb.OnPartitionLeadershipChangesRequest{Leaders: tps})
		require.NoError(b, err)
		for _, tp := range tps {
			testwait.Until(b, "the load of partition "+strconv.Itoa(int(tp.Partition)), func() bool {
				r, err := c.CaughtUp(ctx, &pb.CaughtUpRequest{TopicIdPartition: tp})
				return err == nil && r.CaughtUp
			})
		}
	}
	per := int64(live / 100)
	rnd := rand.New(rand.NewPCG(1, 2))
	lat := make([]time.Duration, 0, 20_000)
	for range 20_000 {
		t0 := time.Now()
		if len(tps) == 0 {
			_, err = c.CaughtUp(ctx, &pb.CaughtUpRequest{TopicIdPartition: probe})
		} else {
			var r *pb.GetSegmentResponse
			r, err = c.GetSegment(ctx, &pb.GetSegmentRequest{TopicIdPartition: tps[rnd.IntN(len(tps))], Epoch: 0, Offset: rnd.Int64N(per * 100)})
			if err == nil && r.Segment == nil {
				err = fmt.Errorf("a lookup missed")
			}
		}
		require.NoError(b, err)
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	if release {
		want := int32(1) // at the start
		if len(tps) > 0 {
			want = 2 // and after the loads
		}
		testwait.Until(b, "rlmmd's releases of its binary's pages", func() bool { return releases.Load() >= want })
	}
	st := procStatus(b, cmd.Process.Pid)
	b.ReportMetric(float64(st["VmRSS"])/1e6, "rss-MB")
	b.ReportMetric(float64(st["RssAnon"])/1e6, "anon-MB")
	b.ReportMetric(float64(st["RssFile"])/1e6, "file-MB")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// procStatus reads the kB fields of /proc/PID/status, in bytes.
func procStatus(b *testing.B, pid int) map[string]int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(b, err)
	defer func() { _ = f.Close() }()
	st := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.HasSuffix(v, " kB") {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(v, " kB")), 10, 64)
			require.NoError(b, err)
			st[k] = n * 1024
		}
	}
	require.NoError(b, sc.Err())
	return st
}
