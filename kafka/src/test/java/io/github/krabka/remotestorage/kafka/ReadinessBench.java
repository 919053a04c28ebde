package io.github.krabka.remotestorage.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

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
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.Uuid;
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
 * bench.partitions user partitions: each segment added and finished, and
 * all but the newest ~15 % of each partition's segments deleted (started
 * and finished) as newer ones come. The broker restarts with TBRLMM; the
 * import tool then copies the topic into the store; the broker restarts
 * again with the plugin. Measured each time: the time from the restart's
 * return until the broker's RLMM says isReady for every user partition,
 * and the memory the metadata holds (heap used after GC against the
 * heap before the records were written; for the plugin, rlmmd's VmRSS
 * added). The live set is checked through TBRLMM after its restart, and
 * in the store before the plugin's. The user partitions hold no records:
 * a remote log task that runs once the RLMM is ready finds the segments
 * beyond the log's end and starts deleting one of each partition, so the
 * tasks run an hour apart and the plugin's live set is counted before
 * its restart. Writes a plot of time to ready
 * against H (bench.svg). Run with `make kafka-readiness-bench`.
 */
class ReadinessBench {
    static final int METADATA_PARTITIONS = 50;
    static final double LIVE_FRACTION = 0.15;
    static final String TBRLMM = "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager";

    /** One history size's figures. */
    record Result(long records, long live, int partitions, double writeS, double tbrlmmReadyS, double tbrlmmRestartS,
                  long tbrlmmHeap, double importS, double pluginReadyS, double pluginRestartS, long pluginHeap, long rlmmdRss) {
    }

    @Test
    void readiness() throws Exception {
        int partitions = Integer.getInteger("bench.partitions", 100);
        List<Result> results = new ArrayList<>();
        for (String h : System.getProperty("bench.records", "100000,1000000").split(",")) {
            results.add(run(Long.parseLong(h.trim()), partitions));
        }
        System.out.printf("ReadinessBench: load average %s%n", Files.readString(Path.of("/proc/loadavg")).trim());
        Path svg = Path.of(System.getProperty("bench.svg", "target/readiness.svg"));
        Files.writeString(svg, plot(results));
        System.out.println("ReadinessBench: plot written to " + svg.toAbsolutePath());
    }

    static Result run(long h, int partitions) throws Exception {
        // Per user partition: n segments, the newest `live` of them kept:
        // 2 records a segment added and finished, 2 more a segment deleted.
        long perPartition = h / partitions;
        int n = (int) Math.round(perPartition / (4 - 2 * LIVE_FRACTION));
        int live = (int) Math.round(n * LIVE_FRACTION);
        long records = (long) partitions * (2L * n + 2L * (n - live));
        Path remote = Files.createTempDirectory("rlmm-readiness");
        Map<String, String> config = new HashMap<>();
        config.put("remote.log.storage.system.enable", "true");
        config.put("remote.log.storage.manager.class.name", LocalDirRemoteStorageManager.class.getName());
        config.put("rsm.config.dir", remote.toString());
        config.put("remote.log.metadata.manager.class.name", TBRLMM);
        config.put("remote.log.metadata.manager.listener.name", "EXTERNAL");
        config.put("rlmm.config.remote.log.metadata.topic.replication.factor", "1");
        config.put("rlmm.config.remote.log.metadata.topic.num.partitions", String.valueOf(METADATA_PARTITIONS));
        // The remote log tasks run once when a partition's leadership
        // starts, skipped while the RLMM is not ready, then after an hour.
        config.put("remote.log.manager.task.interval.ms", "3600000");
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
            long heap0 = heapAfterGc();

            long t0 = System.nanoTime();
            produce(cluster, tps, n, live);
            double writeS = (System.nanoTime() - t0) / 1e9;

            double[] tb = restart(cluster, tps, Map.of());
            assertEquals((long) live * partitions, liveSegments(rlmm(cluster), tps), "live segments TBRLMM holds");
            long tbHeap = heapAfterGc() - heap0;

            TbrlmmTool tool = new TbrlmmTool(System.out, new PrintStream(System.err, true, StandardCharsets.UTF_8));
            t0 = System.nanoTime();
            int code = tool.run("import", "--bootstrap-server", cluster.bootstrapServers(), "--rlmmd", rlmmd.target(),
                "--topic", "__remote_log_metadata", "--group", "readiness", "--parallelism", "8");
            double importS = (System.nanoTime() - t0) / 1e9;
            assertEquals(TbrlmmTool.EXIT_OK, code, "import");
            assertEquals(records, tool.applied(), "records imported");

            try (RlmmdRemoteLogMetadataManager m = new RlmmdRemoteLogMetadataManager()) {
                m.configure(Map.of(RlmmdConfig.TARGET, rlmmd.target(), "broker.id", "1"));
                assertEquals((long) live * partitions, liveSegments(m, tps), "live segments in the store");
            }
            double[] pl = restart(cluster, tps, Map.of("remote.log.metadata.manager.class.name", RlmmdRemoteLogMetadataManager.class.getName(),
                "rlmm.config." + RlmmdConfig.TARGET, rlmmd.target()));
            long plHeap = heapAfterGc() - heap0;
            long rss = vmRss(rlmmd.pid());
            Result r = new Result(records, (long) live * partitions, partitions, writeS, tb[0], tb[1], tbHeap, importS, pl[0], pl[1], plHeap, rss);
            String line = String.format(Locale.ROOT, "ReadinessBench: H=%d records (%d user partitions, %d live segments), written in %.1f s; "
                    + "TBRLMM ready %.2f s after the restart returned (restart %.2f s), heap %+.1f MB; import %.1f s (%.0f records/s, "
                    + "--parallelism 8); plugin ready %.2f s after the restart returned (restart %.2f s), heap %+.1f MB, rlmmd VmRSS %.1f MB%n",
                records, partitions, r.live, writeS, tb[0], tb[1], tbHeap / 1e6, importS, records / importS, pl[0], pl[1], plHeap / 1e6, rss / 1e6);
            System.out.println(line);
            // Also in a file: the broker's log can outrun the test's output.
            Files.writeString(Path.of("target/readiness.txt"), line + " load " + Files.readString(Path.of("/proc/loadavg")),
                StandardOpenOption.CREATE, StandardOpenOption.APPEND);
            return r;
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

    /** Restarts broker 0; returns the seconds from the restart's return to ready, and the restart's own. */
    static double[] restart(KitCluster cluster, List<TopicIdPartition> tps, Map<String, Object> overrides) throws Exception {
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
        return new double[] {(t2 - t1) / 1e9, (t1 - t0) / 1e9};
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

    static long vmRss(long pid) throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/" + pid + "/status"))) {
            if (line.startsWith("VmRSS:")) {
                return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
            }
        }
        throw new IOException("no VmRSS in /proc/" + pid + "/status");
    }

    /** Time to ready against H, both managers, log-log. */
    static String plot(List<Result> rs) {
        int w = 640;
        int ht = 400;
        int left = 70;
        int bottom = 50;
        double minX = Math.floor(Math.log10(rs.stream().mapToLong(Result::records).min().orElse(10)));
        double maxX = Math.max(minX + 1, Math.ceil(Math.log10(rs.stream().mapToLong(Result::records).max().orElse(100))));
        double minY = -3;
        double maxY = Math.max(1, Math.ceil(Math.log10(rs.stream().mapToDouble(r -> Math.max(r.tbrlmmReadyS, r.pluginReadyS)).max().orElse(1))));
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
                double v = s == 0 ? r.tbrlmmReadyS : r.pluginReadyS;
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
