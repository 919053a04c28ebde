package io.github.krabka.remotestorage.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.apache.kafka.common.config.ConfigException;
import org.junit.jupiter.api.Test;

class EmbeddedRlmmdTest {
    @Test
    void platforms() {
        assertEquals("linux-amd64", EmbeddedRlmmd.platform("Linux", "amd64"));
        assertEquals("linux-amd64", EmbeddedRlmmd.platform("Linux", "x86_64"));
        assertEquals("linux-arm64", EmbeddedRlmmd.platform("Linux", "aarch64"));
        assertNull(EmbeddedRlmmd.platform("Mac OS X", "aarch64"));
        assertNull(EmbeddedRlmmd.platform("Windows 11", "amd64"));
        assertNull(EmbeddedRlmmd.platform("Linux", "ppc64le"));
    }

    @Test
    void aPlatformWithoutABinaryNamesItAndTheSidecarMode() {
        ConfigException e = assertThrows(ConfigException.class, () -> EmbeddedRlmmd.requirePlatform("Mac OS X", "aarch64", "0.1.0+x"));
        assertTrue(e.getMessage().contains("os.name Mac OS X") && e.getMessage().contains("os.arch aarch64"), e.getMessage());
        assertTrue(e.getMessage().contains("rlmm.config.rlmmd.target") && e.getMessage().contains("sidecar"), e.getMessage());
        assertEquals("linux-arm64", EmbeddedRlmmd.requirePlatform("Linux", "aarch64", "0.1.0+x"));
    }

    @Test
    void passwordsAreScrubbed() {
        assertEquals("err=\"connect postgres://u:xxxxx@h:5432/db\"", EmbeddedRlmmd.scrub("err=\"connect postgres://u:secret@h:5432/db\""));
        assertEquals("host=h password=xxxxx user=u", EmbeddedRlmmd.scrub("host=h password=secret user=u"));
        assertEquals("password = xxxxx", EmbeddedRlmmd.scrub("password = 'two words'"));
        assertEquals("no secret here", EmbeddedRlmmd.scrub("no secret here"));
    }

    @Test
    void bothModesAreRefused() {
        ConfigException e = assertThrows(ConfigException.class, () -> new RlmmdConfig(Map.of(RlmmdConfig.DATABASE_URL, "postgres://h/db",
            RlmmdConfig.TARGET, "127.0.0.1:9190")));
        assertTrue(e.getMessage().contains("rlmm.config.database.url and rlmm.config.rlmmd.target"), e.getMessage());
        assertEquals("127.0.0.1:9190", new RlmmdConfig(Map.of()).target(), "neither: the sidecar at its default");
        assertTrue(new RlmmdConfig(Map.of(RlmmdConfig.DATABASE_URL, "host=h")).embedded());
    }
}
