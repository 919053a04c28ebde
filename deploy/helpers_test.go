//go:build opskit

// Helpers of the kit's tests: rlmmd built as the Makefile builds it, run as a
// process, its log read for its addresses, its /metrics scraped, and a
// client that does what a broker does.

package deploy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/krabka/remotestorage/internal/logtest"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/testwait"
	pb "github.com/krabka/remotestorage/proto/remotestorage/v1"
)

// repo is the repository's root: go test runs in deploy/.
const repo = ".."

func TestMain(m *testing.M) { pgtest.Main(m) }

var (
	buildOnce sync.Once
	builtPath string
	buildErr  error
)

// rlmmdBinary builds rlmmd once, as the image does (static, -tags
// grpcnotrace), into bin/.
func rlmmdBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		builtPath, buildErr = filepath.Abs(filepath.Join(repo, "bin", "rlmmd-opskit"))
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-tags", "grpcnotrace", "-o", builtPath, "./cmd/rlmmd")
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/rlmmd: %w\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return builtPath
}

// process is a running rlmmd (or the unit's or image's command).
type process struct {
	cmd     *exec.Cmd
	log     *logtest.Buffer
	serving chan [2]string // its gRPC and metrics addresses, once it serves
	exited  chan struct{}
	waitErr error
}

var servingLine = regexp.MustCompile(`msg="rlmmd: serving" listen=(\S+) metrics=(\S*)`)

// startProcess runs argv with env (nothing else of the test's environment)
// and reads its standard error.
func startProcess(t *testing.T, argv []string, env []string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(argv[0], argv[1:]...), log: &logtest.Buffer{}, serving: make(chan [2]string, 1), exited: make(chan struct{})}
	p.cmd.Env = env
	stderr, err := p.cmd.StderrPipe()
	require.NoError(t, err)
	p.cmd.Stdout = p.log
	require.NoError(t, p.cmd.Start())
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(p.log, line)
			if m := servingLine.FindStringSubmatch(line); m != nil {
				p.serving <- [2]string{m[1], m[2]}
			}
		}
		_, _ = io.Copy(p.log, stderr)
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.exited:
		case <-time.After(testwait.Timeout(t) / 2):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("the output of %s:\n%s", argv[0], p.log)
		}
	})
	return p
}

// addresses waits until the process logs that it serves.
func (p *process) addresses(t *testing.T) (grpcAddr, metricsAddr string) {
	t.Helper()
	select {
	case a := <-p.serving:
		return a[0], a[1]
	case <-p.exited:
		t.Fatalf("rlmmd exited (%v) before serving:\n%s", p.waitErr, p.log)
	case <-time.After(testwait.Timeout(t)):
		t.Fatalf("rlmmd did not serve within %s:\n%s", testwait.Timeout(t), p.log)
	}
	return "", ""
}

// exit waits for the process to end by itself and returns its exit code
// and how long it ran.
func (p *process) exit(t *testing.T, started time.Time) (int, time.Duration) {
	t.Helper()
	select {
	case <-p.exited:
		return p.cmd.ProcessState.ExitCode(), time.Since(started)
	case <-time.After(testwait.Timeout(t)):
		t.Fatalf("the process did not exit within %s:\n%s", testwait.Timeout(t), p.log)
	}
	return 0, 0
}

// scrape reads a /metrics endpoint.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return families
}

// value is the value of the first series of family name whose labels
// include want; false when there is none.
func value(families map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f, ok := families[name]
	if !ok {
		return 0, false
	}
series:
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue series
			}
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue(), true
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue(), true
		case dto.MetricType_UNTYPED:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

// seriesNames are the names a Prometheus server stores for families: a
// histogram's _bucket, _sum and _count, a summary's quantiles under its
// name and its _sum and _count.
func seriesNames(families map[string]*dto.MetricFamily) map[string]bool {
	out := map[string]bool{}
	for name, f := range families {
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			out[name+"_bucket"], out[name+"_sum"], out[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			out[name], out[name+"_sum"], out[name+"_count"] = true, true, true
		default:
			out[name] = true
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// freePort is a TCP port on loopback that nothing listened on a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// broker is a gRPC client doing what a broker's plugin does.
type broker struct {
	conn   *grpc.ClientConn
	client pb.RemoteLogMetadataServiceClient
}

func dialRlmmd(t *testing.T, target string) broker {
	t.Helper()
	return dialRlmmdWith(t, target, insecure.NewCredentials())
}

func dialRlmmdWith(t *testing.T, target string, creds credentials.TransportCredentials) broker {
	t.Helper()
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return broker{conn: conn, client: pb.NewRemoteLogMetadataServiceClient(conn)}
}

func callCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testwait.Timeout(t))
	t.Cleanup(cancel)
	return ctx
}

func newTP() *pb.TopicIdPartition {
	id := uuid.New()
	return &pb.TopicIdPartition{TopicId: id[:], Topic: "opskit", Partition: 0}
}

func newSegment(tp *pb.TopicIdPartition, start, end int64) *pb.Segment {
	id := uuid.New()
	return &pb.Segment{
		Id:                  &pb.SegmentId{TopicIdPartition: tp, Id: id[:]},
		StartOffset:         start,
		EndOffset:           end,
		MaxTimestampMs:      1000 + end,
		BrokerId:            1,
		EventTimestampMs:    5,
		SegmentSizeInBytes:  100,
		State:               pb.SegmentState_SEGMENT_STATE_COPY_SEGMENT_STARTED,
		SegmentLeaderEpochs: []*pb.EpochStart{{Epoch: 0, StartOffset: start}},
		TxnIndexEmpty:       true,
	}
}

func (b broker) update(t *testing.T, s *pb.Segment, st pb.SegmentState) {
	t.Helper()
	_, err := b.client.UpdateSegment(callCtx(t), &pb.UpdateSegmentRequest{Update: &pb.SegmentUpdate{
		Id: s.Id, EventTimestampMs: 6, State: st, BrokerId: 1,
	}})
	require.NoError(t, err)
}

// healthy waits until rlmmd's health check says SERVING.
func (b broker) healthy(t *testing.T) {
	t.Helper()
	h := healthpb.NewHealthClient(b.conn)
	testwait.Until(t, "rlmmd's health check SERVING", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		r, err := h.Check(ctx, &healthpb.HealthCheckRequest{})
		return err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING
	})
}

// addAndReadBack leads a new partition, adds a segment, finishes its copy
// and reads it back by offset, as a broker's upload and fetch do.
func (b broker) addAndReadBack(t *testing.T) *pb.Segment {
	t.Helper()
	tp := newTP()
	_, err := b.client.OnPartitionLeadershipChanges(callCtx(t), &pb.OnPartitionLeadershipChangesRequest{Leaders: []*pb.TopicIdPartition{tp}})
	require.NoError(t, err)
	s := newSegment(tp, 0, 99)
	_, err = b.client.AddSegment(callCtx(t), &pb.AddSegmentRequest{Segment: s})
	require.NoError(t, err)
	b.update(t, s, pb.SegmentState_SEGMENT_STATE_COPY_SEGMENT_FINISHED)
	var got *pb.Segment
	testwait.Until(t, "the segment read back", func() bool {
		r, err := b.client.GetSegment(callCtx(t), &pb.GetSegmentRequest{TopicIdPartition: tp, Epoch: 0, Offset: 50})
		if err != nil || r.GetSegment() == nil {
			return false
		}
		got = r.GetSegment()
		return true
	})
	require.Equal(t, s.Id.Id, got.Id.Id, "the segment that holds offset 50")
	require.Equal(t, pb.SegmentState_SEGMENT_STATE_COPY_SEGMENT_FINISHED, got.State)
	return got
}

// environ is a process environment from name=value pairs.
func environ(vars map[string]string) []string {
	out := make([]string, 0, len(vars))
	for _, k := range sortedKeys(vars) {
		out = append(out, k+"="+vars[k])
	}
	return out
}

func mustAbs(t *testing.T, path string) string {
	t.Helper()
	p, err := filepath.Abs(path)
	require.NoError(t, err)
	return p
}
