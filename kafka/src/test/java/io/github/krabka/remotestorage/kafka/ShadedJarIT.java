package io.github.krabka.remotestorage.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.jar.JarFile;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * The jar a broker loads child first: no class of Kafka (a second copy of
 * the interface fails with ClassCastException) and nothing of its own
 * dependencies outside the relocated package.
 */
class ShadedJarIT {
    @Test
    void carriesNoKafkaAndRelocatesTheRest() throws Exception {
        Path jar = Path.of(System.getProperty("rlmm.plugin.jar", "target/remotestorage-kafka-0.1.0.jar"));
        try (JarFile f = new JarFile(jar.toFile())) {
            List<String> classes = f.stream().map(e -> e.getName()).filter(n -> n.endsWith(".class")).collect(Collectors.toList());
            assertTrue(classes.contains("io/github/krabka/remotestorage/kafka/RlmmdRemoteLogMetadataManager.class"));
            List<String> outside = classes.stream()
                .filter(n -> !n.startsWith("io/github/krabka/remotestorage/"))
                .collect(Collectors.toList());
            assertEquals(List.of(), outside, "classes outside the plugin's packages");
        }
    }
}
