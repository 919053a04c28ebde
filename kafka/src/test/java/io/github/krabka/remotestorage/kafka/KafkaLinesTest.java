package io.github.krabka.remotestorage.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class KafkaLinesTest {
    @Test
    void runningIsTheClassPathsKafka() {
        assertEquals(System.getProperty("kafka.expected.version", "4.4.0"), KafkaLines.running());
    }

    @ParameterizedTest
    @CsvSource({
        "3.9.1, true", "3.9.0, true", "4.0.2, true", "4.3.2, true", "4.4.0, true", "4.4.1-SNAPSHOT, true",
        "3.8.1, false", "2.8.2, false", "4.5.0, false", "5.0.0, false", "unknown, false", "'', false",
    })
    void tested(String version, boolean want) {
        assertEquals(want, KafkaLines.tested(version), version);
    }
}
