package io.github.krabka.remotestorage.kafka;

import io.github.krabka.remotestorage.v1.ListSegmentsRequest;
import io.github.krabka.remotestorage.v1.ListSegmentsResponse;
import io.github.krabka.remotestorage.v1.RemoteLogMetadataServiceGrpc;
import io.github.krabka.remotestorage.v1.RemoteLogMetadataServiceGrpc.RemoteLogMetadataServiceBlockingStub;
import io.grpc.Channel;
import java.util.Iterator;
import java.util.concurrent.TimeUnit;

/**
 * The blocking client of remotestorage.v1.RemoteLogMetadataService: the stub
 * protoc-gen-grpc-java generates from proto/remotestorage/v1/rlmm.proto at
 * build time, with the plugin's deadlines. Failures throw
 * StatusRuntimeException.
 */
final class RlmmdClient {
    private final RemoteLogMetadataServiceBlockingStub stub;
    private final long callTimeoutMs;
    private final long listTimeoutMs;

    RlmmdClient(Channel channel, long callTimeoutMs, long listTimeoutMs) {
        this.stub = RemoteLogMetadataServiceGrpc.newBlockingStub(channel);
        this.callTimeoutMs = callTimeoutMs;
        this.listTimeoutMs = listTimeoutMs;
    }

    /** The stub for one unary call: its deadline starts now. */
    RemoteLogMetadataServiceBlockingStub call() {
        return stub.withDeadlineAfter(callTimeoutMs, TimeUnit.MILLISECONDS);
    }

    /** The stub for one unary call with a deadline of its own. */
    RemoteLogMetadataServiceBlockingStub call(long timeoutMs) {
        return stub.withDeadlineAfter(timeoutMs, TimeUnit.MILLISECONDS);
    }

    /** The list stream; the deadline covers the whole stream. */
    Iterator<ListSegmentsResponse> list(ListSegmentsRequest request) {
        return stub.withDeadlineAfter(listTimeoutMs, TimeUnit.MILLISECONDS).listSegments(request);
    }
}
