package io.github.krabka.remotestorage.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.server.log.remote.metadata.storage.RemoteLogMetadataTopicPartitioner;
import org.apache.kafka.server.log.remote.metadata.storage.serialization.RemoteLogMetadataSerde;
import org.apache.kafka.server.log.remote.storage.RemoteLogMetadataManager;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentId;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadataUpdate;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentState;
import org.junit.jupiter.api.Test;

/**
 * Restart readiness of Kafka's TopicBasedRemoteLogMetadataManager (TBRLMM)
 * and of this plugin, one broker (in process), one run: for each history
 * size H (-Dbench.records, comma separated), H metadata records written
 * with Kafka's serde into __remote_log_metadata (50 partitions) for
 * bench.partitions user partitions, the live set held fixed at bench.live
 * segments: each segment added and finished, and all but each partition's
 * newest bench.live / bench.partitions segments deleted (started and
 * finished) as newer ones come. Beside them, a partition with real data
 * (probe-0: three 1 MiB segments copied to the remote tier, its local log
 * deleted below them). The broker restarts with TBRLMM; the import tool
 * then copies the topic into the store (--skip-deleted unless
 * bench.skip.deleted=false); the broker restarts again with the plugin.
 * Measured each time, from the restart's return (two restarts, one for
 * each): the time until the RLMM says isReady for every user partition;
 * the time until a consumer gets probe-0's offset 0, which only the remote
 * tier holds, and the remote fetches of it that failed until then (the broker's RemoteFetchErrorsPerSec:
 * TBRLMM answers ReplicaNotAvailableException until it has replayed); the memory the metadata holds (heap used after GC against
 * the heap before the records were written; for the plugin, in the
 * embedded mode, its child's VmRSS and RssAnon added, and beside them
 * those of another embedded plugin's child on the same database that
 * holds no partition). The live set is checked through TBRLMM after its restart,
 * and in the store before the plugin's. The user partitions hold no
 * records: a remote log task that runs once the RLMM is ready finds the
 * segments beyond the log's end and starts deleting one of each
 * partition, so the tasks run an hour apart and the plugin's live set is
 * counted before its restart. Writes a plot of time to ready against H
 * (bench.svg). Run with `make kafka-readiness-bench`.
 */
class ReadinessBench {
    static final int METADATA_PARTITIONS = 50;
    static final String TBRLMM = "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager";

    /** One history size's figures. */
    record Result(long records, long live, int partitions, double writeS, Restart tbrlmm, long tbrlmmHeap, double importS,
                  long importWrites, Restart plugin, long pluginHeap, long pluginOwn, long rlmmdRss, long idleRlmmdRss, long rlmmdAnon, long idleRlmmdAnon) {
    }

    /** A restart's figures: seconds to isReady and to the first remote fetch after its return, the failed remote fetches, its own seconds. */
    record Restart(double readyS, double fetchS, long fetchErrors, double restartS) {
    }

    @Test
    void readiness() throws Exception {
        int partitions = Integer.getInteger("bench.partitions", 100);
        int live = Integer.getInteger("bench.live", 40_000);
        List<Result> results = new ArrayList<>();
        for (String h : System.getProperty("bench.records", "100000,1000000").split(",")) {
            results.add(run(Long.parseLong(h.trim()), partitions, live / partitions));
        }
        System.out.printf("ReadinessBench: load average %s%n", Files.readString(Path.of("/proc/loadavg")).trim());
        Path svg = Path.of(System.getProperty("bench.svg", "target/readiness.svg"));
        Files.writeString(svg, plot(results));
        System.out.println("ReadinessBench: plot written to " + svg.toAbsolutePath());
    }

    static final TopicPartition PROBE = new TopicPartition("probe", 0);

    static Result run(long h, int partitions, int live) throws Exception {
        // Per user partition: n segments, the newest `live` of them kept:
        // 2 records a segment added and finished, 2 more a segment deleted.
        long perPartition = h / partitions;
        int n = (int) Math.max(live, Math.round((perPartition + 2.0 * live) / 4));
        long records = (long) partitions * (2L * n + 2L * (n - live));
        boolean skipDeleted = Boolean.parseBoolean(System.getProperty("bench.skip.deleted", "true"));
        Path remote = Files.createTempDirectory("rlmm-readiness");
        Map<String, String> config = new HashMap<>();
        config.put("remote.log.storage.system.enable", "true");
        config.put("remote.log.storage.manager.class.name", LocalDirRemoteStorageManager.class.getName());
        config.put("rsm.config.dir", remote.toString());
        config.put("remote.log.metadata.manager.class.name", TBRLMM);
        config.put("remote.log.metadata.manager.listener.name", "EXTERNAL");
        config.put("rlmm.config.remote.log.metadata.topic.replication.factor", "1");
        config.put("rlmm.config.remote.log.metadata.topic.num.partitions", String.valueOf(METADATA_PARTITIONS));
        // The remote log tasks run every 300 ms while the probe is copied;
        // from the restart after that, once when a partition's leadership
        // starts (skipped while the RLMM is not ready), then after an hour.
        config.put("remote.log.manager.task.interval.ms", "300");
        config.put("log.retention.check.interval.ms", "300");
        config.put("log.initial.task.delay.ms", "100");
        config.put("offsets.topic.replication.factor", "1");
        config.put("offsets.topic.num.partitions", "1");
        try (Fixture.Postgres pg = new Fixture.Postgres();
             Fixture.Rlmmd rlmmd = new Fixture.Rlmmd(pg.database("readiness")).start();
             KitCluster cluster = KitCluster.start(false, 1, 1, Map.of(), config);
             Admin admin = Admin.create(Map.<String, Object>of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrapServers()))) {
            String topic = "user";
            Uuid id = admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1).configs(Map.of("remote.storage.enable", "true",
                "retention.ms", "-1", "retention.bytes", "-1")))).topicId(topic).get();
            List<TopicIdPartition> tps = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                tps.add(new TopicIdPartition(id, p, topic));
            }
            awaitReady(cluster, tps);
            admin.createTopics(List.of(new NewTopic(PROBE.topic(), 1, (short) 1).configs(Map.of("remote.storage.enable", "true",
                "segment.bytes", String.valueOf(1 << 20), "local.retention.ms", "1000", "file.delete.delay.ms", "100",
                "retention.ms", "-1")))).all().get();
            produceProbe(cluster);
            cluster.restartBroker(0, Map.of("remote.log.manager.task.interval.ms", "3600000"));
            awaitReady(cluster, tps);
            long heap0 = heapAfterGc();

            long t0 = System.nanoTime();
            produce(cluster, tps, n, live);
            double writeS = (System.nanoTime() - t0) / 1e9;

            Restart tb = restart(cluster, tps, Map.of());
            assertEquals((long) live * partitions, liveSegments(rlmm(cluster), tps), "live segments TBRLMM holds");
            long tbHeap = heapAfterGc() - heap0;
            System.out.println("ReadinessBench: the heap's largest classes with TBRLMM:\n" + largestClasses(12));

            TbrlmmTool tool = new TbrlmmTool(System.out, new PrintStream(System.err, true, StandardCharsets.UTF_8));
            List<String> args = new ArrayList<>(List.of("import", "--bootstrap-server", cluster.bootstrapServers(), "--rlmmd", rlmmd.target(),
                "--topic", "__remote_log_metadata", "--group", "readiness", "--parallelism", "8"));
            if (skipDeleted) {
                args.add("--skip-deleted");
            }
            t0 = System.nanoTime();
            int code = tool.run(args.toArray(new String[0]));
            double importS = (System.nanoTime() - t0) / 1e9;
            assertEquals(TbrlmmTool.EXIT_OK, code, "import");
            // The probe's records besides the history's.
            assertTrue(tool.applied() + tool.skippedDeleted() >= records, "records imported");
            long applied = tool.applied();
            tool = null; // unreachable before the plugin's heap is measured

            try (RlmmdRemoteLogMetadataManager m = new RlmmdRemoteLogMetadataManager()) {
                m.configure(Map.of(RlmmdConfig.TARGET, rlmmd.target(), "broker.id", "1"));
                assertEquals((long) live * partitions, liveSegments(m, tps), "live segments in the store");
            }
            // The plugin in the embedded mode: its child's memory is the broker host's cost of the metadata.
            Restart pl;
            try (LogCapture logs = new LogCapture()) {
                pl = restart(cluster, tps, Map.of("remote.log.metadata.manager.class.name", RlmmdRemoteLogMetadataManager.class.getName(),
                    "rlmm.config." + RlmmdConfig.DATABASE_URL, rlmmd.dsn));
                // The child's memory as it serves: once it dropped its binary's pages after the loads.
                String released = "rlmmd[" + TieredBrokers.childPid(0) + "] msg=\"rlmmd: released the binary's pages\" after=\"partitions loaded\"";
                Fixture.await("the child's release of its binary's pages", () -> logs.text().contains(released));
            }
            long plHeap = heapAfterGc() - heap0;
            long plOwn = ownObjects();
            System.out.println("ReadinessBench: the heap's largest classes with the plugin:\n" + largestClasses(12));
            long child = TieredBrokers.childPid(0);
            long rss = Fixture.procStatus(child, "VmRSS:");
            long anon = Fixture.procStatus(child, "RssAnon:");
            // The child's own share: another embedded plugin's child on the same database, serving, holding no partition.
            long idleRss;
            long idleAnon;
            try (LogCapture logs = new LogCapture(); RlmmdRemoteLogMetadataManager m = new RlmmdRemoteLogMetadataManager()) {
                m.configure(Map.of(RlmmdConfig.DATABASE_URL, rlmmd.dsn, "broker.id", "idle"));
                m.remoteLogSegmentMetadata(tps.get(0), 0, 0);
                long idle = m.embeddedRlmmd().getPid();
                String released = "rlmmd[" + idle + "] msg=\"rlmmd: released the binary's pages\" after=started";
                Fixture.await("the idle child's release of its binary's pages", () -> logs.text().contains(released));
                idleRss = Fixture.procStatus(idle, "VmRSS:");
                idleAnon = Fixture.procStatus(idle, "RssAnon:");
            }
            Result r = new Result(records, (long) live * partitions, partitions, writeS, tb, tbHeap, importS, applied, pl, plHeap, plOwn, rss, idleRss, anon, idleAnon);
            String line = String.format(Locale.ROOT, "ReadinessBench: H=%d records (%d user partitions, %d live segments), written in %.1f s; "
                    + "TBRLMM ready %.2f s, first remote fetch %.2f s (%d failed remote fetches), after the restart returned (restart %.2f s), "
                    + "heap %+.1f MB; import %.1f s (%.0f records/s, %d writes, --parallelism 8%s); plugin ready %.3f s, first remote fetch "
                    + "%.3f s (%d failed remote fetches) after the restart returned (restart %.2f s), heap %+.1f MB (its own objects %.1f MB), the child's VmRSS %.1f MB, RssAnon %.1f MB (%.1f and %.1f MB holding no partition)%n",
                records, partitions, r.live, writeS, tb.readyS, tb.fetchS, tb.fetchErrors, tb.restartS, tbHeap / 1e6, importS, records / importS,
                applied, skipDeleted ? ", --skip-deleted" : "", pl.readyS, pl.fetchS, pl.fetchErrors, pl.restartS, plHeap / 1e6, plOwn / 1e6, rss / 1e6, anon / 1e6, idleRss / 1e6, idleAnon / 1e6);
            System.out.println(line);
            // Also in a file: the broker's log can outrun the test's output.
            Files.writeString(Path.of("target/readiness.txt"), line + " load " + Files.readString(Path.of("/proc/loadavg")),
                StandardOpenOption.CREATE, StandardOpenOption.APPEND);
            return r;
        }
    }

    static byte[] probeValue(long i) {
        byte[] v = new byte[1000];
        java.util.Arrays.fill(v, (byte) ('a' + i % 26));
        return v;
    }

    /** Three 1 MiB segments and a bit into probe-0, copied; waits until the remote tier alone holds offset 0. */
    static void produceProbe(KitCluster cluster) throws Exception {
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(Map.<String, Object>of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG,
            cluster.bootstrapServers(), ProducerConfig.ACKS_CONFIG, "all"), new ByteArraySerializer(), new ByteArraySerializer())) {
            for (long i = 0; i < 3.2 * (1 << 20) / 1070; i++) {
                p.send(new ProducerRecord<>(PROBE.topic(), 0, null, probeValue(i)));
            }
            p.flush();
        }
        try (Admin admin = Admin.create(Map.<String, Object>of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrapServers()))) {
            Fixture.await("probe-0's local log deleted below its remote segments", () -> {
                try {
                    return admin.listOffsets(Map.of(PROBE, OffsetSpec.earliestLocal())).partitionResult(PROBE).get().offset() > 0;
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
            });
        }
    }

    /** Writes the history as TBRLMM does: Kafka's serde, the partition of Kafka's partitioner, in order per user partition. */
    static void produce(KitCluster cluster, List<TopicIdPartition> tps, int n, int live) throws Exception {
        RemoteLogMetadataSerde serde = new RemoteLogMetadataSerde();
        RemoteLogMetadataTopicPartitioner partitioner = new RemoteLogMetadataTopicPartitioner(METADATA_PARTITIONS);
        AtomicReference<Exception> failed = new AtomicReference<>();
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(Map.<String, Object>of(
            ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrapServers(), ProducerConfig.LINGER_MS_CONFIG, "20",
            ProducerConfig.BATCH_SIZE_CONFIG, String.valueOf(1 << 20), ProducerConfig.COMPRESSION_TYPE_CONFIG, "lz4"),
            new ByteArraySerializer(), new ByteArraySerializer())) {
            for (TopicIdPartition tp : tps) {
                int mp = partitioner.metadataPartition(tp);
                List<RemoteLogSegmentId> ids = new ArrayList<>(n);
                for (int i = 0; i < n; i++) {
                    long start = i * 100L;
                    RemoteLogSegmentMetadata s = new RemoteLogSegmentMetadata(new RemoteLogSegmentId(tp, Uuid.randomUuid()), start, start + 99,
                        i, 1, i, 1 << 20, Optional.empty(), RemoteLogSegmentState.COPY_SEGMENT_STARTED, Map.of(0, start));
                    ids.add(s.remoteLogSegmentId());
                    send(p, topicRecord(mp, serde.serialize(s)), failed);
                    send(p, topicRecord(mp, serde.serialize(new RemoteLogSegmentMetadataUpdate(s.remoteLogSegmentId(), i,
                        Optional.empty(), RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 1))), failed);
                    if (i >= live) {
                        for (RemoteLogSegmentState st : List.of(RemoteLogSegmentState.DELETE_SEGMENT_STARTED, RemoteLogSegmentState.DELETE_SEGMENT_FINISHED)) {
                            send(p, topicRecord(mp, serde.serialize(new RemoteLogSegmentMetadataUpdate(ids.get(i - live), i, Optional.empty(), st, 1))), failed);
                        }
                    }
                }
            }
            p.flush();
        }
        if (failed.get() != null) {
            throw failed.get();
        }
    }

    static ProducerRecord<byte[], byte[]> topicRecord(int partition, byte[] value) {
        return new ProducerRecord<>("__remote_log_metadata", partition, null, value);
    }

    static void send(KafkaProducer<byte[], byte[]> p, ProducerRecord<byte[], byte[]> r, AtomicReference<Exception> failed) {
        p.send(r, (md, e) -> {
            if (e != null) {
                failed.compareAndSet(null, e);
            }
        });
    }

    /** The broker's RLMM (reflection: BrokerServer.remoteLogManagerOpt is Scala). */
    static RemoteLogMetadataManager rlmm(KitCluster cluster) {
        try {
            Object broker = cluster.broker(0);
            assertNotNull(broker, "broker 0");
            Object opt = broker.getClass().getMethod("remoteLogManagerOpt").invoke(broker);
            Object rlm = opt.getClass().getMethod("get").invoke(opt);
            return (RemoteLogMetadataManager) rlm.getClass().getMethod("remoteLogMetadataManager").invoke(rlm);
        } catch (ReflectiveOperationException e) {
            throw new AssertionError("the broker's RemoteLogMetadataManager", e);
        }
    }

    static boolean allReady(KitCluster cluster, List<TopicIdPartition> tps) {
        RemoteLogMetadataManager m = rlmm(cluster);
        return tps.stream().allMatch(m::isReady);
    }

    static void awaitReady(KitCluster cluster, List<TopicIdPartition> tps) throws InterruptedException {
        Fixture.await("the RLMM is ready for every user partition", () -> allReady(cluster, tps));
    }

    /**
     * Restarts broker 0 twice. After the first, the time from the restart's
     * return until isReady of every user partition. After the second, the
     * time until a consumer (made before the restart) gets probe-0's offset
     * 0, and the broker's failed remote fetches of the probe until then.
     * Apart, so that neither measurement takes the other's CPU.
     */
    static Restart restart(KitCluster cluster, List<TopicIdPartition> tps, Map<String, Object> overrides) throws Exception {
        long t0 = System.nanoTime();
        cluster.restartBroker(0, overrides);
        long t1 = System.nanoTime();
        while (!allReady(cluster, tps)) {
            if (System.nanoTime() - t1 > Fixture.TIMEOUT.toNanos() * 10) {
                throw new AssertionError("not ready " + Fixture.TIMEOUT.multipliedBy(10) + " after the restart");
            }
            Thread.onSpinWait();
        }
        long t2 = System.nanoTime();
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(Map.<String, Object>of(
            ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrapServers(), ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false",
            ConsumerConfig.RETRY_BACKOFF_MS_CONFIG, "10", ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "10"),
            new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            c.assign(List.of(PROBE));
            c.seek(PROBE, 0);
            cluster.restartBroker(0);
            long t3 = System.nanoTime();
            while (System.nanoTime() - t3 < Fixture.TIMEOUT.toNanos() * 10) {
                var records = c.poll(java.time.Duration.ofMillis(10));
                if (!records.isEmpty()) {
                    long t4 = System.nanoTime();
                    var first = records.records(PROBE).get(0);
                    assertEquals(0, first.offset(), "probe-0's first record");
                    assertTrue(java.util.Arrays.equals(probeValue(0), first.value()), "probe-0's record 0");
                    awaitReady(cluster, tps);
                    return new Restart((t2 - t1) / 1e9, (t4 - t3) / 1e9, remoteFetchErrors(), (t1 - t0) / 1e9);
                }
            }
            throw new AssertionError("probe-0's offset 0 never arrived");
        }
    }

    /**
     * The broker's count of the probe's remote fetches that failed (Kafka's
     * RemoteFetchErrorsPerSec of the topic): each is a fetch the consumer
     * got an error for, ReplicaNotAvailableException while TBRLMM replays.
     * A broker's shutdown removes its meters: the count starts at 0 with
     * each start.
     */
    static long remoteFetchErrors() {
        long n = 0;
        for (var e : org.apache.kafka.server.metrics.KafkaYammerMetrics.defaultRegistry().allMetrics().entrySet()) {
            if (e.getKey().getName().equals("RemoteFetchErrorsPerSec") && e.getKey().getMBeanName().contains("topic=" + PROBE.topic())
                && e.getValue() instanceof com.yammer.metrics.core.Meter m) {
                n += m.count();
            }
        }
        return n;
    }

    static long liveSegments(RemoteLogMetadataManager m, List<TopicIdPartition> tps) throws Exception {
        long live = 0;
        for (TopicIdPartition tp : tps) {
            var it = m.listRemoteLogSegments(tp);
            while (it.hasNext()) {
                if (it.next().state() == RemoteLogSegmentState.COPY_SEGMENT_FINISHED) {
                    live++;
                }
            }
        }
        return live;
    }

    static long heapAfterGc() {
        for (int i = 0; i < 3; i++) {
            System.gc();
        }
        return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
    }

    /**
     * The bytes of the heap's objects of the plugin's classes and of the
     * libraries it shades (gRPC, Netty, protobuf), from the JVM's class
     * histogram (jcmd GC.class_histogram): what the plugin itself holds, the
     * rest of the heap figure being the broker's.
     */
    static long ownObjects() throws Exception {
        long bytes = 0;
        for (String line : classHistogram().split("\n")) {
            String[] f = line.trim().split("\\s+");
            if (f.length >= 4 && f[0].endsWith(":") && f[3].startsWith("io.github.krabka.remotestorage.")) {
                bytes += Long.parseLong(f[2]);
            }
        }
        return bytes;
    }

    /** The JVM's class histogram (jcmd GC.class_histogram), after a full collection. */
    static String classHistogram() throws Exception {
        return (String) ManagementFactory.getPlatformMBeanServer().invoke(
            new javax.management.ObjectName("com.sun.management:type=DiagnosticCommand"), "gcClassHistogram",
            new Object[] {new String[0]}, new String[] {String[].class.getName()});
    }

    /** The histogram's head: its n classes of the most bytes. */
    static String largestClasses(int n) throws Exception {
        String[] lines = classHistogram().split("\n");
        return String.join("\n", java.util.Arrays.copyOfRange(lines, 0, Math.min(lines.length, n + 2)));
    }

    /** A size field of /proc/PID/status (VmRSS:, RssAnon:), in bytes. */
    /** Time to ready against H, both managers, log-log. */
    static String plot(List<Result> rs) {
        int w = 640;
        int ht = 400;
        int left = 70;
        int bottom = 50;
        double minX = Math.floor(Math.log10(rs.stream().mapToLong(Result::records).min().orElse(10)));
        double maxX = Math.max(minX + 1, Math.ceil(Math.log10(rs.stream().mapToLong(Result::records).max().orElse(100))));
        double minY = -3;
        double maxY = Math.max(1, Math.ceil(Math.log10(rs.stream().mapToDouble(r -> Math.max(r.tbrlmm.readyS, r.plugin.readyS)).max().orElse(1))));
        StringBuilder b = new StringBuilder();
        b.append(String.format(Locale.ROOT, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">%n", w, ht));
        b.append("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
        int pw = w - left - 20;
        int ph = ht - bottom - 40;
        java.util.function.DoubleUnaryOperator x = v -> left + (Math.log10(v) - minX) / (maxX - minX) * pw;
        java.util.function.DoubleUnaryOperator y = v -> 40 + ph - (Math.log10(Math.max(v, 1e-3)) - minY) / (maxY - minY) * ph;
        b.append(String.format(Locale.ROOT, "<text x=\"%d\" y=\"20\">Time to ready after a broker restart (isReady of every partition), log-log</text>%n", left));
        b.append(String.format(Locale.ROOT, "<rect x=\"%d\" y=\"40\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"black\"/>%n", left, pw, ph));
        for (double e = minX; e <= maxX; e++) {
            double px = x.applyAsDouble(Math.pow(10, e));
            b.append(String.format(Locale.ROOT, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">1e%d</text>%n", px, ht - bottom + 20, (int) e));
        }
        for (double e = minY; e <= maxY; e++) {
            double py = y.applyAsDouble(Math.pow(10, e));
            b.append(String.format(Locale.ROOT, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s s</text>%n", left - 5, py + 4,
                e < 0 ? String.format(Locale.ROOT, "%.3f", Math.pow(10, e)).replaceAll("0+$", "") : String.valueOf((long) Math.pow(10, e))));
            b.append(String.format(Locale.ROOT, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>%n", left, left + pw, py, py));
        }
        b.append(String.format(Locale.ROOT, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">metadata records in the history (H)</text>%n",
            left + pw / 2, ht - 10));
        String[][] series = {{"TBRLMM", "#d62728"}, {"rlmmd plugin", "#1f77b4"}};
        for (int s = 0; s < 2; s++) {
            StringBuilder pts = new StringBuilder();
            for (Result r : rs) {
                double v = s == 0 ? r.tbrlmm.readyS : r.plugin.readyS;
                double px = x.applyAsDouble(r.records);
                double py = y.applyAsDouble(v);
                pts.append(String.format(Locale.ROOT, "%.1f,%.1f ", px, py));
                b.append(String.format(Locale.ROOT, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>%n", px, py, series[s][1]));
                b.append(String.format(Locale.ROOT, "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\">%.3f s</text>%n", px + 6, py - 6, series[s][1], v));
            }
            b.append(String.format(Locale.ROOT, "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\"/>%n", pts.toString().trim(), series[s][1]));
            b.append(String.format(Locale.ROOT, "<text x=\"%d\" y=\"%d\" fill=\"%s\">%s</text>%n", left + 10, 58 + 16 * s, series[s][1], series[s][0]));
        }
        b.append("</svg>\n");
        return b.toString();
    }
}
