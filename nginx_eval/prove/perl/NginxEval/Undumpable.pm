package NginxEval::Undumpable;

# Loaded into every Perl of a test run in the pinned toolchain (PERL5OPT, prove/env.py): prove,
# the test file, and what they start. prctl(PR_SET_DUMPABLE, 0) makes the process undumpable, so
# that a process of the same user without capabilities (the patch's nginx, which the test file
# starts as the same account) can neither open its file descriptors through /proc (prove's
# stdout, the TAP the grade reads; the test file's pipe to prove) nor read, write or trace its
# memory. Without it, nginx could rewrite the TAP in place or write a stream of its own into it.

use strict;
use warnings;
use Config ();

# The prctl system call's number, by architecture; syscall.ph knows the others but takes longer
# to load than the test file itself.
my %PRCTL = (x86_64 => 157, aarch64 => 167, i386 => 172, i686 => 172);
my ($arch) = $Config::Config{archname} =~ /^([^-]+)/;
my $prctl = $PRCTL{$arch} // do { require 'syscall.ph'; &SYS_prctl() };
my $PR_SET_DUMPABLE = 4;

syscall($prctl, $PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    or die "nginx-eval: prctl(PR_SET_DUMPABLE, 0) failed: $!\n";

1;
