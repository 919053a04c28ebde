package io.github.krabka.remotestorage.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
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
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentId;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadataUpdate;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentState;
import org.junit.jupiter.api.Test;

/**
 * The import's and verify's throughput: a metadata topic of 50 partitions
 * (TBRLMM's default) holding BENCH_PARTITIONS user partitions of
 * BENCH_SEGMENTS segments each, every segment copied and the first fifth
 * deleted, imported with --parallelism 1 and 8 into fresh databases, then
 * verified. Run with `make kafka-import-bench`; not part of the suites.
 */
class TbrlmmImportBench {
    /** One record, acknowledged before the next: a failed send fails the benchmark. */
    static Object sendOne(KafkaProducer<byte[], byte[]> p, ProducerRecord<byte[], byte[]> r) throws Exception {
        return p.send(r).get();
    }

    @Test
    void throughput() throws Exception {
        int partitions = Integer.getInteger("bench.partitions", 200);
        int segments = Integer.getInteger("bench.segments", 25);
        String topic = "meta-bench";
        try (Fixture.Postgres pg = new Fixture.Postgres();
             KitCluster cluster = TieredBrokers.oneBroker();
             Admin admin = Admin.create(Map.<String, Object>of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrapServers()))) {
            admin.createTopics(List.of(new NewTopic(topic, 50, (short) 1))).all().get();
            RemoteLogMetadataSerde serde = new RemoteLogMetadataSerde();
            RemoteLogMetadataTopicPartitioner partitioner = new RemoteLogMetadataTopicPartitioner(50);
            int records = 0;
            List<Object> sent = new ArrayList<>();
            try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(Map.<String, Object>of(
                ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrapServers(), ProducerConfig.ACKS_CONFIG, "all",
                ProducerConfig.LINGER_MS_CONFIG, "0"), new ByteArraySerializer(), new ByteArraySerializer())) {
                // Every partition has a leader the producer knows before the first send.
                Fixture.await("the leaders of " + topic, () -> p.partitionsFor(topic).stream().filter(i -> i.leader() != null).count() == 50);
                for (int u = 0; u < partitions; u++) {
                    TopicIdPartition tp = new TopicIdPartition(Uuid.randomUuid(), u % 8, "bench-" + u);
                    int mp = partitioner.metadataPartition(tp);
                    List<RemoteLogSegmentId> ids = new ArrayList<>();
                    for (int i = 0; i < segments; i++) {
                        RemoteLogSegmentMetadata s = new RemoteLogSegmentMetadata(new RemoteLogSegmentId(tp, Uuid.randomUuid()), i * 100L,
                            i * 100L + 99, i, 1, i, 1 << 20, Optional.empty(), RemoteLogSegmentState.COPY_SEGMENT_STARTED, Map.of(i / 10, i * 100L));
                        ids.add(s.remoteLogSegmentId());
                        sent.add(sendOne(p, new ProducerRecord<>(topic, mp, null, serde.serialize(s))));
                        sent.add(sendOne(p, new ProducerRecord<>(topic, mp, null, serde.serialize(new RemoteLogSegmentMetadataUpdate(s.remoteLogSegmentId(),
                            i, Optional.empty(), RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 1)))));
                        records += 2;
                    }
                    for (int i = 0; i < segments / 5; i++) {
                        for (RemoteLogSegmentState st : List.of(RemoteLogSegmentState.DELETE_SEGMENT_STARTED, RemoteLogSegmentState.DELETE_SEGMENT_FINISHED)) {
                            sent.add(sendOne(p, new ProducerRecord<>(topic, mp, null, serde.serialize(new RemoteLogSegmentMetadataUpdate(ids.get(i), 9,
                                Optional.empty(), st, 1)))));
                            records++;
                        }
                    }
                }
            }
            for (int parallelism : new int[] {1, 8}) {
                try (Fixture.Rlmmd rlmmd = new Fixture.Rlmmd(pg.database("bench" + parallelism)).start()) {
                    PrintStream quiet = new PrintStream(System.err, true, StandardCharsets.UTF_8);
                    TbrlmmTool tool = new TbrlmmTool(System.out, quiet);
                    long t0 = System.nanoTime();
                    int code = tool.run("import", "--bootstrap-server", cluster.bootstrapServers(), "--rlmmd", rlmmd.target(), "--topic", topic,
                        "--group", "bench" + parallelism, "--parallelism", String.valueOf(parallelism));
                    double importS = (System.nanoTime() - t0) / 1e9;
                    assertEquals(TbrlmmTool.EXIT_OK, code);
                    assertEquals(records, tool.applied());
                    t0 = System.nanoTime();
                    code = new TbrlmmTool(System.out, quiet).run("verify", "--bootstrap-server", cluster.bootstrapServers(), "--rlmmd",
                        rlmmd.target(), "--topic", topic);
                    double verifyS = (System.nanoTime() - t0) / 1e9;
                    assertEquals(TbrlmmTool.EXIT_OK, code);
                    System.out.printf("TbrlmmImportBench: %d records (%d user partitions x %d segments), --parallelism %d: import %.1f s "
                        + "(%.0f records/s, both passes and start-up included), verify %.1f s%n", records, partitions, segments, parallelism,
                        importS, records / importS, verifyS);
                }
            }
        }
    }
}
