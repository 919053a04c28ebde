package reliability_test

// The network failing between an rlmmd and PostgreSQL: rlmmd runs in a
// network namespace of its own (internal/netfault), PostgreSQL on this
// machine, and the link's packets are dropped silently, so that no reset
// arrives and TCP waits. These tests need root, as CI has.

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/netfault"
	"github.com/krabka/remotestorage/internal/pgcluster"
	"github.com/krabka/remotestorage/internal/testwait"
	pb "github.com/krabka/remotestorage/proto/remotestorage/v1"
)

// netFaultBed is a server that listens on the machine's loopback and on
// the namespace's machine end, and an rlmmd in the namespace.
type netFaultBed struct {
	ns     *netfault.Namespace
	dsn    string // the machine's: the unix socket
	port   int    // PostgreSQL's TCP port
	rlmmd  *rlmmdProcess
	client pb.RemoteLogMetadataServiceClient
}

func newNetFaultBed(t *testing.T) *netFaultBed {
	ns := netfault.New(t)
	c, dsn := ownCluster(t, pgcluster.Options{TCP: true,
		ExtraConf: map[string]string{"listen_addresses": "127.0.0.1," + ns.HostIP.String()}, TrustHosts: []netip.Addr{ns.NSIP}})
	_, portText, err := net.SplitHostPort(c.TCPAddr())
	require.NoError(t, err)
	port, err := strconv.Atoi(portText)
	require.NoError(t, err)
	u, err := url.Parse(c.TCPURL("rlmm"))
	require.NoError(t, err)
	u.Host = net.JoinHostPort(ns.HostIP.String(), portText)
	p := startRlmmdIn(t, "rlmmd-in-ns", u.String(), ns)
	return &netFaultBed{ns: ns, dsn: dsn, port: port, rlmmd: p, client: dialRlmmd(t, p.addr)}
}

// listenerPort is the namespace's port of rlmmd's LISTEN connection, from
// the server's view of its sessions.
func (b *netFaultBed) listenerPort(t *testing.T) int {
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(t))
	defer cancel()
	conn, err := pgx.Connect(ctx, b.dsn)
	require.NoError(t, err)
	defer func() { _ = conn.Close(context.Background()) }()
	var ports []int
	testwait.Until(t, "rlmmd's LISTEN session", func() bool {
		rows, err := conn.Query(ctx, `SELECT client_port FROM pg_stat_activity
			WHERE client_addr = $1::inet AND state = 'idle' AND query LIKE 'LISTEN %'`, b.ns.NSIP.String())
		require.NoError(t, err)
		ports, err = pgx.CollectRows(rows, pgx.RowTo[int])
		require.NoError(t, err)
		return len(ports) == 1
	})
	return ports[0]
}

// freshness is the check that no read CaughtUp vouched for is stale: a
// writer on the machine's side adds and finishes segments of tp, one at a
// time; a reader asks the namespace's rlmmd CaughtUp(tp), and, when true,
// lists tp there, which must hold every segment finished before CaughtUp
// began.
type freshness struct {
	t      *testing.T
	tp     rs.TopicIDPartition
	writer rs.RemoteLogMetadataManager
	reader pb.RemoteLogMetadataServiceClient

	mu       sync.Mutex
	finished []rs.RemoteLogSegmentID // acknowledged, in order

	trues, falses, errs int // the reader's CaughtUp answers
	lastTrue            time.Time
}

func (f *freshness) write(ctx context.Context, i int64) error {
	s := segmentOf(f.tp, i)
	if err := f.writer.AddRemoteLogSegmentMetadata(ctx, s); err != nil {
		return err
	}
	err := f.writer.UpdateRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadataUpdate{
		SegmentID: s.SegmentID, State: rs.CopySegmentFinished, EventTimestampMs: 1})
	if err == nil {
		f.mu.Lock()
		f.finished = append(f.finished, s.SegmentID)
		f.mu.Unlock()
	}
	return err
}

// read makes one check; it fails the test on a stale read.
func (f *freshness) read() {
	f.mu.Lock()
	want := append([]rs.RemoteLogSegmentID(nil), f.finished...)
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r, err := f.reader.CaughtUp(ctx, &pb.CaughtUpRequest{TopicIdPartition: pbTP(f.tp)})
	switch {
	case err != nil:
		f.errs++
		return
	case !r.CaughtUp:
		f.falses++
		return
	}
	f.trues++
	f.lastTrue = time.Now()
	list, err := rpcManager{f.reader}.ListRemoteLogSegments(ctx, f.tp)
	if err != nil {
		return // a list that fails is no stale answer
	}
	have := map[rs.RemoteLogSegmentID]bool{}
	for _, s := range list {
		have[s.SegmentID] = true
	}
	for i, id := range want {
		require.True(f.t, have[id], "a stale read: CaughtUp was true, yet the list lacks segment %d of %d finished before it (%s)", i+1, len(want), id.ID)
	}
}

// run writes and reads until stop, then reads until a true CaughtUp.
func (f *freshness) run(stop <-chan struct{}) {
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := int64(0); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(f.t))
			require.NoError(f.t, f.write(ctx, i), "the writer's link is not faulted")
			cancel()
		}
	})
	for {
		select {
		case <-stop:
			wg.Wait()
			return
		default:
		}
		f.read()
	}
}

// recovered waits until the reader says CaughtUp and reads every write,
// and returns how long that took.
func (f *freshness) recovered() time.Duration {
	t0 := time.Now()
	testwait.Until(f.t, "a true CaughtUp after the fault", func() bool {
		before := f.trues
		f.read()
		return f.trues > before
	})
	return time.Since(t0)
}

// The faults, each applied to a bed: what it silences, between the
// namespace's rlmmd and PostgreSQL.
var netFaults = []struct {
	name  string
	apply func(t *testing.T, b *netFaultBed) error
}{
	// Its LISTEN connection, both ways; the pool's connections work.
	{"ListenerSilenced", func(t *testing.T, b *netFaultBed) error { return b.ns.DropConn(netfault.Both, b.listenerPort(t)) }},
	// Every connection but its LISTEN connection, new ones too.
	{"PoolSilenced", func(t *testing.T, b *netFaultBed) error {
		return b.ns.DropPortExcept(netfault.Both, b.port, b.listenerPort(t))
	}},
	// Every packet, both ways.
	{"Partitioned", func(t *testing.T, b *netFaultBed) error { return b.ns.DropPort(netfault.Both, b.port) }},
	// PostgreSQL's replies; what rlmmd sends arrives.
	{"RepliesDropped", func(t *testing.T, b *netFaultBed) error { return b.ns.DropPort(netfault.In, b.port) }},
	// 30 % of the packets, each way.
	{"Lossy", func(t *testing.T, b *netFaultBed) error { return b.ns.Lose(netfault.Both, 30) }},
}

// TestNetFaults: under each fault, two checks at once, through two rlmmd,
// the namespace's and one on this machine.
//   - The racing workload, four clients on each rlmmd: the history must be
//     linearizable.
//   - The freshness check, on a partition the namespace's rlmmd consumes: no
//     read that its CaughtUp vouched for is stale.
//
// After 1.5 s the fault holds for 6 s (past the calls' 1 s deadlines and
// the cancel requests' delay); after the heal, the faulted rlmmd must answer
// and be fresh again within 15 s; the workload goes on 3 s more.
func TestNetFaults(t *testing.T) {
	for _, nf := range netFaults {
		t.Run(nf.name, func(t *testing.T) {
			b := newNetFaultBed(t)
			other := startRlmmd(t, "rlmmd-b", b.dsn)
			managers := make([]rs.RemoteLogMetadataManager, 8)
			for i := range managers {
				if i%2 == 0 {
					managers[i] = rpcManager{b.client}
				} else {
					managers[i] = rpcManager{dialRlmmd(t, other.addr)}
				}
			}
			tp := newTP("netfault", 0)
			f := &freshness{t: t, tp: tp, writer: newBroker(t, b.dsn, brokerConfig{}).m, reader: b.client}
			ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(t))
			defer cancel()
			_, err := b.client.OnPartitionLeadershipChanges(ctx, &pb.OnPartitionLeadershipChangesRequest{Leaders: []*pb.TopicIdPartition{pbTP(tp)}})
			require.NoError(t, err)
			require.NoError(t, f.write(ctx, 0))
			f.recovered()

			h := raceHarness(t, newLinRace(len(managers), 2, 2, true))
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() { h.run(managers, stop) })
			stopped := sync.OnceFunc(func() { close(stop); wg.Wait() })
			defer stopped()
			pause := func(d time.Duration) { time.Sleep(d) } // the fault script's own timing
			pause(1500 * time.Millisecond)

			require.NoError(t, nf.apply(t, b))
			t.Logf("fault: %v", b.ns.Rules())
			f.trues, f.falses, f.errs = 0, 0, 0
			faultStop := make(chan struct{})
			faultEnds := time.AfterFunc(6*time.Second, func() { close(faultStop) })
			defer faultEnds.Stop()
			f.run(faultStop)
			during := fmt.Sprintf("%d true, %d false, %d failed", f.trues, f.falses, f.errs)
			require.NoError(t, b.ns.Heal())
			healed := time.Now()
			testwait.Until(t, "the faulted rlmmd reaching PostgreSQL", func() bool {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				_, err := rpcManager{b.client}.ListRemoteLogSegments(ctx, newTP("probe", 0))
				return err == nil
			})
			answered := time.Since(healed)
			f.recovered()
			fresh := time.Since(healed)
			t.Logf("during the fault, CaughtUp answered %s; %d segments finished; after the heal the faulted rlmmd answered in %v, was fresh in %v",
				during, len(f.finished), answered.Round(time.Millisecond), fresh.Round(time.Millisecond))
			require.Less(t, fresh, 15*time.Second, "the faulted rlmmd answering and fresh after the heal")
			pause(3 * time.Second)
			stopped()
			h.requireLinearizable()
		})
	}
}
