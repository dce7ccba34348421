
// src/main.rs: the real transport (zookeeper-client, the default feature).
use zkelect::ZkClientOptions;

#[derive(Clone)]
struct Stdout;

impl Ledger for Stdout {
    fn record(&self, token: FencingToken, entry: String) {
        println!("[{token}] {entry}");
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let election = Election::connect(ZkClientOptions::new("zk1:2181,zk2:2181,zk3:2181"))
        .path("/services/ticker/leader")
        .id("node-a")
        .join()
        .await?;
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    serve(election, Stdout, shutdown).await?;
    Ok(())
}
