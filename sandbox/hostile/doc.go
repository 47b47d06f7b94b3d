// Package hostile holds no code: its tests are a battery of hostile
// commands (fork bomb, memory balloon, output floods, stray processes,
// disk filling, secret and socket hunting) run through the Docker backend
// against the real default sandbox image. Each test ends by checking that
// its sandbox is gone and that the provider still starts a fresh one.
//
//	go test ./sandbox/hostile/
//
// The tests need a Docker engine and the image from `wrench image build`;
// without them they skip, except under CI=true, where they fail.
package hostile
