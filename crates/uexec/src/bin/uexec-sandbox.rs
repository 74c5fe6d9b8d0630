fn main() {
    std::process::exit(uexec_core::sandbox::launcher::run(
        std::env::args_os().skip(1),
    ));
}
