package io.github.krabka.remotestorage.kafka;

import io.grpc.ChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.netty.channel.Channel;
import io.grpc.netty.shaded.io.netty.channel.EventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.IoHandlerFactory;
import io.grpc.netty.shaded.io.netty.channel.MultiThreadIoEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.epoll.Epoll;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollDomainSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollIoHandler;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.nio.NioIoHandler;
import io.grpc.netty.shaded.io.netty.channel.socket.nio.NioSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.unix.DomainSocketAddress;
import io.grpc.netty.shaded.io.netty.util.concurrent.DefaultThreadFactory;
import io.grpc.netty.shaded.io.netty.util.concurrent.GlobalEventExecutor;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The plugin's gRPC channel to rlmmd, and every thread it runs on.
 *
 * <p>gRPC's defaults run a channel on threads shared by the whole class
 * loader (grpc-java's shared event loop group, executor and timer), which it
 * ends about one second after the last channel closed, and Netty's global
 * event executor, which ends a second after its last task. A closed plugin
 * then leaves threads running. Here the channel gets its own: one Netty event
 * loop (the transport's I/O, deadlines and keep-alive: grpc-netty's scheduled
 * executor is the event loop group) and one executor for gRPC's callbacks and
 * offloaded work (DNS resolution, TLS handshake tasks), both from a thread
 * factory that records every thread it made. {@link #close} ends them all and
 * waits for Netty's global event executor, whose thread the event loop's
 * termination starts.
 */
final class RlmmdChannel implements AutoCloseable {
    private static final Logger log = LoggerFactory.getLogger(RlmmdChannel.class);

    /** How long close waits for calls in flight before it cancels them (less when the call deadline is shorter). */
    static final long CLOSE_GRACE_MS = 2_000;
    /**
     * How long close then waits for the threads to end. Netty's global
     * executor ends one quiet second (io.netty.globalEventExecutor.quietPeriodSeconds)
     * after its last task; the rest end within milliseconds.
     */
    static final long CLOSE_THREADS_MS = 3_000;

    private final ManagedChannel channel;
    private final EventLoopGroup group;
    private final ExecutorService executor;
    private final RecordingThreadFactory eventLoopThreads;
    private final RecordingThreadFactory executorThreads;
    private final long graceMs;

    private RlmmdChannel(ManagedChannel channel, EventLoopGroup group, ExecutorService executor,
                         RecordingThreadFactory eventLoopThreads, RecordingThreadFactory executorThreads, long graceMs) {
        this.channel = channel;
        this.group = group;
        this.executor = executor;
        this.eventLoopThreads = eventLoopThreads;
        this.executorThreads = executorThreads;
        this.graceMs = graceMs;
    }

    /**
     * Builds the channel; it connects on its first call. A {@code unix:}
     * target takes Netty's epoll domain sockets, with the name resolution of
     * grpc-netty's unix scheme; a {@code host:port} target epoll's TCP (Java
     * NIO where Netty's native transport does not load) and gRPC's DNS
     * resolution, on the channel's own executor.
     *
     * @throws IllegalArgumentException or another RuntimeException when the
     *     target cannot be used (e.g. a unix socket without the native transport)
     */
    static RlmmdChannel open(String target, ChannelCredentials creds, long callTimeoutMs) {
        boolean unix = target.startsWith("unix:");
        boolean epoll = Epoll.isAvailable();
        if (unix && !epoll) {
            throw new IllegalArgumentException("Netty's native transport is not available: " + Epoll.unavailabilityCause());
        }
        // Named rlmmd-client-eventloop-<pool>-<n> and rlmmd-client-executor-<pool>-<n>.
        RecordingThreadFactory eventLoopThreads = new RecordingThreadFactory("rlmmd-client-eventloop");
        RecordingThreadFactory executorThreads = new RecordingThreadFactory("rlmmd-client-executor");
        IoHandlerFactory io = epoll ? EpollIoHandler.newFactory() : NioIoHandler.newFactory();
        // One event loop: the channel has one connection, served by one loop.
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, eventLoopThreads, io);
        // As gRPC's own shared executor: threads made on demand, ended after a minute idle.
        ExecutorService executor = new ThreadPoolExecutor(0, Integer.MAX_VALUE, 60, TimeUnit.SECONDS,
            new SynchronousQueue<>(), executorThreads);
        Class<? extends Channel> channelType = unix ? EpollDomainSocketChannel.class
            : epoll ? EpollSocketChannel.class : NioSocketChannel.class;
        RlmmdChannel c = null;
        try {
            ManagedChannel ch = NettyChannelBuilder.forTarget(target, creds)
                .channelType(channelType, unix ? DomainSocketAddress.class : null)
                .eventLoopGroup(group)
                .executor(executor)
                .offloadExecutor(executor)
                .keepAliveTime(30, TimeUnit.SECONDS)
                .keepAliveWithoutCalls(true)
                .build();
            c = new RlmmdChannel(ch, group, executor, eventLoopThreads, executorThreads, Math.min(callTimeoutMs, CLOSE_GRACE_MS));
            return c;
        } finally {
            if (c == null) {
                executor.shutdownNow();
                group.shutdownGracefully(0, 0, TimeUnit.MILLISECONDS);
            }
        }
    }

    ManagedChannel channel() {
        return channel;
    }

    /**
     * Shuts the channel down and returns once every thread it ran on has
     * ended: it waits up to {@link #CLOSE_GRACE_MS} (or the call deadline,
     * when shorter) for calls in flight and then cancels them, ends the
     * executor and the event loop, and waits for their threads and for
     * Netty's global event executor, at most {@link #CLOSE_THREADS_MS} in
     * all. Nothing here waits on rlmmd: a down rlmmd does not slow it.
     */
    @Override
    public void close() {
        boolean interrupted = false;
        long deadline = 0;
        try {
            channel.shutdown();
            boolean ended = channel.awaitTermination(graceMs, TimeUnit.MILLISECONDS);
            deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(CLOSE_THREADS_MS);
            if (!ended) {
                // Cancels the calls still in flight; the transports then
                // close on the event loop, which must outlive them.
                channel.shutdownNow();
                channel.awaitTermination(remainingMs(deadline), TimeUnit.MILLISECONDS);
            }
        } catch (InterruptedException e) {
            interrupted = true;
            channel.shutdownNow();
        }
        if (deadline == 0) {
            deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(CLOSE_THREADS_MS);
        }
        executor.shutdownNow();
        group.shutdownGracefully(0, 0, TimeUnit.MILLISECONDS);
        boolean globalEnded = true;
        try {
            executor.awaitTermination(remainingMs(deadline), TimeUnit.MILLISECONDS);
            // Completed on Netty's global event executor once the event loop has ended.
            boolean groupEnded = group.terminationFuture().await(remainingMs(deadline), TimeUnit.MILLISECONDS);
            // A pool's or loop's termination is signalled a moment before its thread ends.
            for (Thread t : threads()) {
                t.join(Math.max(1, remainingMs(deadline)));
            }
            if (groupEnded) {
                // This class loader's copy of Netty: a broker loads the
                // plugin child first, so its global executor is the plugin's.
                globalEnded = GlobalEventExecutor.INSTANCE.awaitInactivity(Math.max(1, remainingMs(deadline)), TimeUnit.MILLISECONDS);
            }
        } catch (InterruptedException e) {
            interrupted = true;
        } catch (IllegalStateException e) {
            // awaitInactivity: the global executor's thread never started.
        }
        List<String> alive = new ArrayList<>();
        if (!globalEnded) {
            alive.add("Netty's global event executor");
        }
        for (Thread t : threads()) {
            alive.add(t.getName());
        }
        if (!alive.isEmpty()) {
            log.warn("remotestorage: threads of the rlmmd client still running after close: {}", alive);
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    /** Every thread the channel's event loop and executor made and that has not ended. */
    private List<Thread> threads() {
        List<Thread> all = new ArrayList<>(eventLoopThreads.threads());
        all.addAll(executorThreads.threads());
        return all;
    }

    private static long remainingMs(long deadlineNanos) {
        return Math.max(0, TimeUnit.NANOSECONDS.toMillis(deadlineNanos - System.nanoTime()));
    }

    /** Netty's thread factory (daemon threads, FastThreadLocalThread), keeping the threads it made until they end. */
    private static final class RecordingThreadFactory extends DefaultThreadFactory {
        private final Set<Thread> made = ConcurrentHashMap.newKeySet();

        RecordingThreadFactory(String name) {
            super(name, true);
        }

        @Override
        public Thread newThread(Runnable r) {
            made.removeIf(t -> t.getState() == Thread.State.TERMINATED);
            Thread t = super.newThread(r);
            made.add(t);
            return t;
        }

        List<Thread> threads() {
            List<Thread> live = new ArrayList<>();
            for (Thread t : made) {
                if (t.getState() != Thread.State.TERMINATED) {
                    live.add(t);
                }
            }
            return live;
        }
    }
}
