package pgtest

// container.go: the container route, a PostgreSQL image started through
// testcontainers on whatever engine answers (Docker or podman).

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	"github.com/testcontainers/testcontainers-go/wait"
)

// engineHost names the engine testcontainers will ask, for messages.
func engineHost() string {
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return "DOCKER_HOST=" + h
	}
	return "the default Docker socket (DOCKER_HOST unset)"
}

// engineHealthy asks the engine for its info. With no engine it fails in
// about a millisecond. A DOCKER_HOST that does not answer would hang, since
// testcontainers' discovery does not take a context, so the question is
// bounded: by ctx (the server's start-up budget) when PGTEST_ROUTE names
// the container route, and by autoEngineTimeout when the route is chosen
// automatically, where a silent engine should not hold up the local route
// for minutes. podman's API service answers its info in 1-2 s on a busy
// 2-core machine.
func engineHealthy(ctx context.Context, named bool) error {
	if !named {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, autoEngineTimeout)
		defer cancel()
	}
	result := make(chan error, 1)
	go func() { result <- askEngine(ctx) }()
	select {
	case err := <-result:
		return err
	case <-ctx.Done():
		return fmt.Errorf("no container engine answered at %s: %w", engineHost(), context.Cause(ctx))
	}
}

// autoEngineTimeout bounds the engine's first answer when no route is named.
const autoEngineTimeout = 30 * time.Second

// askEngine is engineHealthy without the bound. testcontainers panics in
// some discovery paths when there is no engine.
func askEngine(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("no container engine at %s: %v", engineHost(), r)
		}
	}()
	provider, err := testcontainers.NewDockerProvider()
	if err != nil {
		return fmt.Errorf("no container engine at %s: %w", engineHost(), err)
	}
	// Health closes the provider.
	if err := provider.Health(ctx); err != nil {
		return fmt.Errorf("no container engine at %s: %w", engineHost(), err)
	}
	return nil
}

func startContainer(ctx context.Context) (ServerInfo, func() error, error) {
	img := Image()
	ctr, err := tcpostgres.Run(ctx, img,
		// Replaces the module's default command, which turns fsync off.
		testcontainers.WithCmd("postgres", "-c", "shared_buffers=128MB", "-c", "max_connections=300"),
		// The module's BasicWaitStrategies with a longer deadline than its
		// default minute: initdb and two starts on a busy machine.
		testcontainers.WithWaitStrategyAndDeadline(3*time.Minute,
			wait.ForLog("database system is ready to accept connections").WithOccurrence(2),
			wait.ForListeningPort("5432/tcp"),
		),
	)
	stop := func() error { return testcontainers.TerminateContainer(ctr) }
	if err != nil {
		_ = stop()
		return ServerInfo{}, nil, fmt.Errorf("start %s at %s: %w", img, engineHost(), err)
	}
	dsn, err := ctr.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		_ = stop()
		return ServerInfo{}, nil, err
	}
	return ServerInfo{
		Kind: FromContainer, AdminURL: dsn,
		Detail: fmt.Sprintf("image %s, container %.12s, at %s", img, ctr.GetContainerID(), engineHost()),
	}, stop, nil
}
