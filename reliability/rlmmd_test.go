// rlmmd as a process: built once per test binary, started, killed,
// frozen; and a client that makes the harness's calls through its gRPC
// service.

package reliability_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/netfault"
	"github.com/krabka/remotestorage/internal/testwait"
	pb "github.com/krabka/remotestorage/proto/remotestorage/v1"
)

// rlmmdBuild is the rlmmd binary of this test binary, built on first use
// into binDir, which TestMain removes.
var rlmmdBuild struct {
	once sync.Once
	path string
	took time.Duration
	err  error
}

// binDir holds the binaries the tests build; TestMain removes it.
var binDir string

// rlmmdBinary builds rlmmd once, with -race when the tests have it (the
// packages are then mostly in the build cache already, and a race in rlmmd
// shows in its log).
func rlmmdBinary(t *testing.T) string {
	t.Helper()
	rlmmdBuild.once.Do(func() {
		start := time.Now()
		goCmd, err := exec.LookPath("go")
		if err != nil {
			rlmmdBuild.err = fmt.Errorf("building rlmmd needs the go command on PATH: %w", err)
			return
		}
		path := filepath.Join(binDir, "rlmmd")
		args := []string{"build", "-o", path}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command(goCmd, append(args, "./cmd/rlmmd")...)
		cmd.Dir = ".." // the module's root: the tests run in their package's directory
		if out, err := cmd.CombinedOutput(); err != nil {
			rlmmdBuild.err = fmt.Errorf("go build ./cmd/rlmmd: %w\n%s", err, out)
			return
		}
		rlmmdBuild.path, rlmmdBuild.took = path, time.Since(start)
	})
	require.NoError(t, rlmmdBuild.err)
	return rlmmdBuild.path
}

// rlmmdProcess is an rlmmd serving one database on one loopback port, the
// same port across restarts. Its log (stderr, every run of it) is kept for
// the test's failure message.
type rlmmdProcess struct {
	t    *testing.T
	name string
	dsn  string
	addr string
	ns   *netfault.Namespace // nil: this machine's network

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when the current run has exited and its log is read
	log    []string
	races  bool // the race detector reported something
}

var servingLine = regexp.MustCompile(`msg="rlmmd: serving".* listen=(\S+)`)

// startRlmmd starts rlmmd on a free loopback port (metrics off) against
// dsn. The process is stopped at cleanup, and the test fails if the race
// detector reported anything in it.
func startRlmmd(t *testing.T, name, dsn string) *rlmmdProcess {
	t.Helper()
	return startRlmmdIn(t, name, dsn, nil)
}

// startRlmmdIn starts rlmmd as startRlmmd does, in network namespace ns
// (nil: this machine's), listening on a unix socket.
func startRlmmdIn(t *testing.T, name, dsn string, ns *netfault.Namespace) *rlmmdProcess {
	t.Helper()
	p := &rlmmdProcess{t: t, name: name, dsn: dsn, ns: ns}
	t.Cleanup(func() {
		p.stop()
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.races {
			t.Errorf("%s: the race detector reported a race; its log:\n%s", p.name, strings.Join(p.log, "\n"))
		}
		if t.Failed() {
			t.Logf("%s's log, last lines:\n%s", p.name, strings.Join(p.log[max(0, len(p.log)-40):], "\n"))
		}
	})
	if ns != nil {
		// A unix socket: the test reaches it from this machine's network,
		// and rlmmd serves plaintext on nothing else but loopback.
		p.start("unix:" + filepath.Join(t.TempDir(), "rlmmd.sock"))
		if !strings.HasPrefix(p.addr, "unix:") {
			p.addr = "unix:" + p.addr // rlmmd names the socket by its path
		}
	} else {
		p.start("127.0.0.1:0")
	}
	return p
}

// start runs rlmmd listening on listen and returns once it serves, taking
// the address it serves on.
func (p *rlmmdProcess) start(listen string) {
	t := p.t
	t.Helper()
	args := []string{"--listen", listen, "--database-url", p.dsn, "--metrics-listen", "", "--shutdown-timeout", "5s"}
	cmd := exec.Command(rlmmdBinary(t), args...)
	if p.ns != nil {
		cmd = p.ns.Command(rlmmdBinary(t), args...)
	}
	cmd.Env = rlmmdEnv()
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	serving := make(chan string, 1)
	exited := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	go func() {
		defer close(exited)
		scanner := bufio.NewScanner(stderr)
		scanner.Buffer(make([]byte, 64<<10), 1<<20)
		for scanner.Scan() {
			line := scanner.Text()
			p.mu.Lock()
			p.log = append(p.log, line)
			p.races = p.races || strings.Contains(line, "WARNING: DATA RACE")
			p.mu.Unlock()
			if m := servingLine.FindStringSubmatch(line); m != nil {
				serving <- m[1]
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		err := cmd.Wait()
		p.mu.Lock()
		p.log = append(p.log, fmt.Sprintf("(exited: %v)", err))
		p.mu.Unlock()
	}()
	select {
	case addr := <-serving:
		p.addr = addr
	case <-exited:
		t.Fatalf("%s exited before serving; its log:\n%s", p.name, p.logText())
	case <-time.After(testwait.Timeout(t)):
		t.Fatalf("%s did not serve within %v; its log:\n%s", p.name, testwait.Timeout(t), p.logText())
	}
}

func (p *rlmmdProcess) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.log, "\n")
}

func (p *rlmmdProcess) signal(sig syscall.Signal) {
	p.t.Helper()
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	require.NoError(p.t, cmd.Process.Signal(sig), "%s: %v", p.name, sig)
}

// restartAfterKill kills rlmmd (SIGKILL: no graceful stop, calls in flight
// cut) and starts it again on the same port.
func (p *rlmmdProcess) restartAfterKill() {
	p.t.Helper()
	p.signal(syscall.SIGKILL)
	<-p.exited
	p.start(p.addr)
}

// stop stops the current run: SIGTERM (after SIGCONT, in case it is
// frozen), then SIGKILL if it has not exited within the test timeout.
func (p *rlmmdProcess) stop() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-exited:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(testwait.Timeout(p.t)):
		p.t.Errorf("%s did not stop within %v of SIGTERM", p.name, testwait.Timeout(p.t))
		_ = cmd.Process.Kill()
		<-exited
	}
}

// rlmmdEnv is the environment without what would configure rlmmd or name
// a database, so that a developer's settings never reach the test's rlmmd.
func rlmmdEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "DATABASE_URL" || strings.HasPrefix(name, "PG") || strings.HasPrefix(name, "RLMMD_") {
			continue
		}
		env = append(env, kv)
	}
	// A race-enabled binary sleeps a second at exit by default.
	return append(env, "GORACE=atexit_sleep_ms=0 "+os.Getenv("GORACE"))
}

// dialRlmmd connects to addr. Calls wait for the connection to be ready
// (within their deadline) rather than fail at once while rlmmd restarts,
// and reconnecting backs off from 20 ms, not gRPC's default second.
func dialRlmmd(t *testing.T, addr string) pb.RemoteLogMetadataServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.WaitForReady(true)),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 200 * time.Millisecond},
			MinConnectTimeout: time.Second,
		}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return pb.NewRemoteLogMetadataServiceClient(conn)
}

// rpcManager makes the manager's calls through rlmmd's gRPC service and
// reports errors as the library would (reportedError).
type rpcManager struct {
	c pb.RemoteLogMetadataServiceClient
}

var _ rs.RemoteLogMetadataManager = rpcManager{}

func (m rpcManager) AddRemoteLogSegmentMetadata(ctx context.Context, s rs.RemoteLogSegmentMetadata) error {
	_, err := m.c.AddSegment(ctx, &pb.AddSegmentRequest{Segment: pbSegment(s)})
	return fromRPC(err)
}

func (m rpcManager) UpdateRemoteLogSegmentMetadata(ctx context.Context, u rs.RemoteLogSegmentMetadataUpdate) error {
	_, err := m.c.UpdateSegment(ctx, &pb.UpdateSegmentRequest{Update: &pb.SegmentUpdate{
		Id: pbSegmentID(u.SegmentID), EventTimestampMs: u.EventTimestampMs, CustomMetadata: u.CustomMetadata,
		State: pb.SegmentState(u.State + 1), BrokerId: u.BrokerID,
	}})
	return fromRPC(err)
}

func (m rpcManager) PutRemotePartitionDeleteMetadata(ctx context.Context, d rs.RemotePartitionDeleteMetadata) error {
	_, err := m.c.PutPartitionDelete(ctx, &pb.PutPartitionDeleteRequest{PartitionDelete: &pb.PartitionDelete{
		TopicIdPartition: pbTP(d.TopicIDPartition), State: pb.PartitionDeleteState(d.State + 1),
		EventTimestampMs: d.EventTimestampMs, BrokerId: d.BrokerID,
	}})
	return fromRPC(err)
}

func (m rpcManager) RemoteLogSegmentMetadata(ctx context.Context, tp rs.TopicIDPartition, epoch rs.LeaderEpoch, offset int64) (rs.RemoteLogSegmentMetadata, bool, error) {
	resp, err := m.c.GetSegment(ctx, &pb.GetSegmentRequest{TopicIdPartition: pbTP(tp), Epoch: int32(epoch), Offset: offset})
	if err != nil || resp.Segment == nil {
		return rs.RemoteLogSegmentMetadata{}, false, fromRPC(err)
	}
	return segmentFromPB(resp.Segment), true, nil
}

func (m rpcManager) HighestOffsetForEpoch(ctx context.Context, tp rs.TopicIDPartition, epoch rs.LeaderEpoch) (int64, bool, error) {
	resp, err := m.c.HighestOffsetForEpoch(ctx, &pb.HighestOffsetForEpochRequest{TopicIdPartition: pbTP(tp), Epoch: int32(epoch)})
	if err != nil {
		return 0, false, fromRPC(err)
	}
	return resp.Offset, resp.Found, nil
}

func (m rpcManager) ListRemoteLogSegments(ctx context.Context, tp rs.TopicIDPartition) ([]rs.RemoteLogSegmentMetadata, error) {
	return m.list(ctx, &pb.ListSegmentsRequest{TopicIdPartition: pbTP(tp)})
}

func (m rpcManager) ListRemoteLogSegmentsByEpoch(ctx context.Context, tp rs.TopicIDPartition, epoch rs.LeaderEpoch) ([]rs.RemoteLogSegmentMetadata, error) {
	e := int32(epoch)
	return m.list(ctx, &pb.ListSegmentsRequest{TopicIdPartition: pbTP(tp), Epoch: &e})
}

func (m rpcManager) list(ctx context.Context, req *pb.ListSegmentsRequest) ([]rs.RemoteLogSegmentMetadata, error) {
	// The stream's context ends with the call: a broken stream is
	// released at once.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := m.c.ListSegments(ctx, req)
	if err != nil {
		return nil, fromRPC(err)
	}
	var out []rs.RemoteLogSegmentMetadata
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fromRPC(err)
		}
		for _, s := range resp.Segments {
			out = append(out, segmentFromPB(s))
		}
	}
}

func (m rpcManager) CaughtUp(ctx context.Context, tp rs.TopicIDPartition) (bool, error) {
	resp, err := m.c.CaughtUp(ctx, &pb.CaughtUpRequest{TopicIdPartition: pbTP(tp)})
	if err != nil {
		return false, fromRPC(err)
	}
	return resp.CaughtUp, nil
}

// rpcKinds maps each ErrorKind to the library's sentinel and the status
// code rlmmd sends it with (cmd/rlmmd/errors.go); NOT_READY and IO are
// UNAVAILABLE, or DEADLINE_EXCEEDED / CANCELLED when the call's deadline or
// cancellation ended them.
var rpcKinds = map[pb.ErrorKind]struct {
	sentinel error
	codes    []codes.Code
}{
	pb.ErrorKind_ERROR_KIND_INVALID_ADD:                         {rs.ErrInvalidAdd, []codes.Code{codes.InvalidArgument}},
	pb.ErrorKind_ERROR_KIND_SEGMENT_NOT_FOUND:                   {rs.ErrSegmentNotFound, []codes.Code{codes.NotFound}},
	pb.ErrorKind_ERROR_KIND_INVALID_SEGMENT_TRANSITION:          {rs.ErrInvalidSegmentTransition, []codes.Code{codes.FailedPrecondition}},
	pb.ErrorKind_ERROR_KIND_INVALID_PARTITION_DELETE_TRANSITION: {rs.ErrInvalidPartitionDeleteTransition, []codes.Code{codes.FailedPrecondition}},
	pb.ErrorKind_ERROR_KIND_NOT_READY:                           {rs.ErrNotReady, []codes.Code{codes.Unavailable, codes.DeadlineExceeded, codes.Canceled}},
	pb.ErrorKind_ERROR_KIND_IO:                                  {rs.ErrIO, []codes.Code{codes.Unavailable, codes.DeadlineExceeded, codes.Canceled}},
}

// fromRPC turns a failed call's status into the error the library would
// have returned. With an ErrorDetail, rlmmd's manager decided: the detail
// names the sentinel, the found state of a refusal, and whether a failed
// write may have applied. Without one the call failed on the way (rlmmd
// killed or frozen under it, the connection broken, the client's deadline):
// the request may have reached the store, so a write's outcome is unknown.
// Anything else matches no sentinel, and the harness reports it.
func fromRPC(err error) error {
	if err == nil {
		return nil
	}
	st := status.Convert(err)
	e := &reportedError{msg: fmt.Sprintf("rlmmd: %s: %s", st.Code(), st.Message())}
	var detail *pb.ErrorDetail
	for _, d := range st.Details() {
		if d, ok := d.(*pb.ErrorDetail); ok {
			detail = d
		}
	}
	if detail == nil {
		switch st.Code() {
		case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Aborted:
			e.sentinel, e.outcomeUnknown = rs.ErrIO, true
		}
		return e
	}
	kind, ok := rpcKinds[detail.GetKind()]
	if !ok || !slices.Contains(kind.codes, st.Code()) {
		e.msg += fmt.Sprintf(" (detail %v does not go with the code)", detail)
		return e
	}
	e.sentinel, e.outcomeUnknown = kind.sentinel, detail.GetOutcomeUnknown()
	if detail.FoundSegmentState != nil {
		e.segment, e.segmentFound = rs.RemoteLogSegmentState(detail.GetFoundSegmentState()-1), true
	}
	if detail.FoundPartitionDeleteState != nil {
		e.deleteFound = true
		if found := detail.GetFoundPartitionDeleteState(); found != pb.PartitionDeleteState_PARTITION_DELETE_STATE_UNSPECIFIED {
			e.deleteState, e.deleteRecord = rs.RemotePartitionDeleteState(found-1), true
		}
	}
	return e
}

// The messages: proto/remotestorage/v1's states are the library's plus
// one (0 is UNSPECIFIED).

func pbTP(tp rs.TopicIDPartition) *pb.TopicIdPartition {
	return &pb.TopicIdPartition{TopicId: tp.TopicID[:], Topic: tp.Topic, Partition: tp.Partition}
}

func pbSegmentID(id rs.RemoteLogSegmentID) *pb.SegmentId {
	return &pb.SegmentId{TopicIdPartition: pbTP(id.TopicIDPartition), Id: id.ID[:]}
}

func pbSegment(s rs.RemoteLogSegmentMetadata) *pb.Segment {
	m := &pb.Segment{
		Id: pbSegmentID(s.SegmentID), StartOffset: s.StartOffset, EndOffset: s.EndOffset, MaxTimestampMs: s.MaxTimestampMs,
		BrokerId: s.BrokerID, EventTimestampMs: s.EventTimestampMs, SegmentSizeInBytes: s.SegmentSizeInBytes,
		CustomMetadata: s.CustomMetadata, State: pb.SegmentState(s.State + 1), TxnIndexEmpty: s.TxnIndexEmpty,
	}
	for _, e := range slices.Sorted(maps.Keys(s.SegmentLeaderEpochs)) {
		m.SegmentLeaderEpochs = append(m.SegmentLeaderEpochs, &pb.EpochStart{Epoch: int32(e), StartOffset: s.SegmentLeaderEpochs[e]})
	}
	return m
}

// segmentFromPB converts what the harness checks; an id that is not 16
// bytes becomes the zero UUID, which the harness reports as unknown.
func segmentFromPB(m *pb.Segment) rs.RemoteLogSegmentMetadata {
	tp := m.GetId().GetTopicIdPartition()
	topicID, _ := uuid.FromBytes(tp.GetTopicId())
	id, _ := uuid.FromBytes(m.GetId().GetId())
	s := rs.RemoteLogSegmentMetadata{
		SegmentID: rs.RemoteLogSegmentID{
			TopicIDPartition: rs.TopicIDPartition{TopicID: topicID, Topic: tp.GetTopic(), Partition: tp.GetPartition()},
			ID:               id,
		},
		StartOffset: m.StartOffset, EndOffset: m.EndOffset, MaxTimestampMs: m.MaxTimestampMs, BrokerID: m.BrokerId,
		EventTimestampMs: m.EventTimestampMs, SegmentSizeInBytes: m.SegmentSizeInBytes, CustomMetadata: m.CustomMetadata,
		State: rs.RemoteLogSegmentState(m.State - 1), TxnIndexEmpty: m.TxnIndexEmpty,
		SegmentLeaderEpochs: map[rs.LeaderEpoch]int64{},
	}
	for _, e := range m.SegmentLeaderEpochs {
		s.SegmentLeaderEpochs[rs.LeaderEpoch(e.Epoch)] = e.StartOffset
	}
	return s
}
