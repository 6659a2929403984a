//! The `gda` command-line tool.

use std::io::Read;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use gda::wire::{self, Kind};

#[derive(Parser)]
#[command(
    name = "gda",
    version,
    about = "Device-initiated RDMA: inspect NIC formats and run the data path"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// See and check what the NIC gets: encode work requests, decode WQEs and CQEs.
    Wire {
        #[command(subcommand)]
        cmd: WireCmd,
    },
}

#[derive(Subcommand)]
enum WireCmd {
    /// Read one JSON work request (ibv_send_wr field names) on stdin; print the WQE bytes,
    /// doorbell record and doorbell as JSON.
    #[command(after_help = concat!(
        "INPUT (JSON on stdin):\n",
        "  {\"opcode\": OPCODE, \"send_flags\": [\"SIGNALED\"|\"FENCE\"|\"SOLICITED\"|\"INLINE\"],\n",
        "   \"qp_num\": N, \"sq_wqe_cnt\": N (WQEBBs, power of two), \"cur_post\": N (WQEBB counter before),\n",
        "   \"sg_list\": [{\"addr\": N, \"length\": N, \"lkey\": N}], \"remote_addr\": N, \"rkey\": N,\n",
        "   \"imm_data\": N (as ibv_send_wr holds it, network order), \"compare_add\": N, \"swap\": N,\n",
        "   \"inline_data\": \"hex\", \"compare_mask\": N, \"swap_mask\": N, \"atomic_bytes\": 4|8,\n",
        "   \"max_inline_data\": N, \"max_send_sge\": N}\n\n",
        "OPCODES:\n  RDMA_WRITE, RDMA_WRITE_WITH_IMM, SEND, SEND_WITH_IMM, RDMA_READ,\n",
        "  ATOMIC_CMP_AND_SWP, ATOMIC_FETCH_AND_ADD (8-byte, as verbs),\n",
        "  MASKED_CMP_AND_SWP   masked compare-swap, 4 or 8 bytes (\"atomic_bytes\"): swaps the bits in\n",
        "                       \"swap_mask\" (default all) if the bits in \"compare_mask\" (default all) match\n",
        "                       \"compare_add\"; with compare_mask 0 it expresses SWAP/SET/AND/OR\n",
        "  MASKED_FETCH_AND_ADD masked fetch-add, 4 or 8 bytes: adds \"compare_add\" with carries cut above\n",
        "                       each bit set in \"swap_mask\" (field boundary); all bits set = XOR\n",
        "  NOP\n\n",
        "OUTPUT: {\"wqe\": hex (ring order, unwrapped), \"dbrec_snd\": N, \"doorbell\": hex (8 bytes),\n",
        "         \"cur_post\": N (after), \"wqe_ds\", \"wqebbs\", \"slot\", \"wqe_index\", \"dbrec_bytes\"}\n\n",
        "EXAMPLE:\n  echo '{\"opcode\":\"RDMA_WRITE\",\"send_flags\":[\"SIGNALED\"],\"qp_num\":4660,\"sq_wqe_cnt\":64,\n",
        "         \"cur_post\":65534,\"sg_list\":[{\"addr\":139637976735744,\"length\":4096,\"lkey\":22136}],\n",
        "         \"remote_addr\":139637976731648,\"rkey\":43981}' | gda wire encode --provider mlx5"
    ))]
    Encode {
        /// NIC format.
        #[arg(long, default_value = "mlx5")]
        provider: String,
    },
    /// Read hex bytes on stdin (spaces allowed); print the decoded fields as JSON.
    Decode {
        /// NIC format.
        #[arg(long, default_value = "mlx5")]
        provider: String,
        /// What the bytes are.
        #[arg(long, value_enum)]
        kind: Kind,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Wire { cmd } => {
            let mut input = String::new();
            if let Err(e) = std::io::stdin().read_to_string(&mut input) {
                eprintln!("gda: cannot read stdin: {e}");
                return ExitCode::from(2);
            }
            match cmd {
                WireCmd::Encode { provider } => wire::encode(&provider, &input),
                WireCmd::Decode { provider, kind } => wire::decode(&provider, kind, &input),
            }
        }
    };
    match result {
        Ok(v) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&v).unwrap_or_else(|_| v.to_string())
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gda: {e}");
            ExitCode::from(1)
        }
    }
}
