//! Generates the gRPC client of rlmmd's service from `proto/` at the
//! repository root, with protox (a protobuf compiler in Rust): no system
//! `protoc` needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_dir = "../../proto";
    let file = "remotestorage/v1/rlmm.proto";
    println!("cargo:rerun-if-changed={proto_dir}/{file}");
    let fds = protox::compile([file], [proto_dir])?;
    tonic_prost_build::configure()
        .build_server(false)
        .compile_fds(fds)?;
    Ok(())
}
