# Sourced by .ci/release: lays out each package's files and builds the .deb
# (dpkg-deb), the .rpm (rpmbuild, with packaging/rpm/*.spec) and the tarball
# from binaries already built and checked. Needs from the caller: $version,
# $dist, $stage_root, $docs (man pages and completions), and for the
# coordinator's packages the full release.

deb_arch() { [ "$1" = x86_64 ] && echo amd64 || echo arm64; }
maintainer=${RLX_MAINTAINER:-"rlx-discover developers <rlx-discover@localhost>"}

# The packaged unit: the repository's, with the binary where the package puts
# it and the manual-install header replaced by the package's.
packaged_unit() {
  sed -e 's|/usr/local/bin/rlx-agent|/usr/bin/rlx-agent|g' \
    -e '/^# systemd unit for rlx-agent, installed by hand/,/^#   sudo systemctl enable --now rlx-agent/c\
# systemd unit for rlx-agent, from its package. Settings: /etc/rlx/agent.toml\
# (then `sudo systemctl restart rlx-agent`); `rlx-agent check` shows them.' \
    -e 's|^SupplementaryGroups=video render$|# rlx-agent: the group the package makes, which reads the key on systemd\
# before 247 (no LoadCredential=; docs/security.md, "Keys on older systemd").\
SupplementaryGroups=video render rlx-agent|' \
    worker-agent/rlx-agent.service
}

# Debian's copyright file: the licences' texts, as Debian policy asks.
debian_copyright() { # PACKAGE
  printf 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\nUpstream-Name: %s\n\nFiles: *\nLicense: MIT or Apache-2.0\n\nLicense: MIT\n' "$1"
  sed 's/^$/./; s/^/ /' LICENSE-MIT
  printf '\nLicense: Apache-2.0\n'
  sed 's/^$/./; s/^/ /' LICENSE-APACHE
}

# The files every package of program NAME carries besides its binary: the
# licences, and its completions where each shell looks for them (ZSHDIR
# differs: Debian's vendor-completions, Fedora's site-functions).
common_files() { # STAGE NAME COMPLETIONS ZSHDIR
  local s=$1 name=$2 comp=$3 zshdir=$4
  install -d "$s/usr/share/doc/$name"
  install -m 644 LICENSE-MIT LICENSE-APACHE "$s/usr/share/doc/$name/"
  install -D -m 644 "$comp/$name.bash" "$s/usr/share/bash-completion/completions/$name"
  install -D -m 644 "$comp/_$name" "$s$zshdir/_$name"
  install -D -m 644 "$comp/$name.fish" "$s/usr/share/fish/vendor_completions.d/$name.fish"
}

# dpkg-deb from a staged tree; conffiles and maintainer scripts given.
build_deb() { # STAGE NAME ARCH DEPENDS DESCRIPTION [CONFFILE...]
  local stage=$1 name=$2 arch=$3 depends=$4 description=$5 out
  shift 5
  debian_copyright "$name" >"$stage/usr/share/doc/$name/copyright"
  install -d "$stage/DEBIAN"
  {
    echo "Package: $name"
    echo "Version: $version-1"
    echo "Architecture: $(deb_arch "$arch")"
    echo "Maintainer: $maintainer"
    echo "Installed-Size: $(du -sk --exclude=DEBIAN "$stage" | cut -f1)"
    echo "Depends: $depends"
    # responder = "system" (avahi-daemon through its DNS-SD library).
    if [ "$name" = rlx-agent ]; then
      echo "Suggests: avahi-daemon, libavahi-compat-libdnssd1"
    fi
    echo "Section: net"
    echo "Priority: optional"
    echo "Description: $description"
  } >"$stage/DEBIAN/control"
  if [ $# -gt 0 ]; then
    printf '%s\n' "$@" >"$stage/DEBIAN/conffiles"
  fi
  for s in postinst prerm postrm; do
    if [ -e "packaging/deb/$name.$s" ]; then
      install -m 755 "packaging/deb/$name.$s" "$stage/DEBIAN/$s"
    fi
  done
  # md5sums of everything but the conffiles (dpkg --verify reads it).
  (cd "$stage" && find . -path ./DEBIAN -prune -o -path ./etc -prune -o -type f -printf '%P\n' |
    sort | xargs md5sum >DEBIAN/md5sums)
  out="$dist/${name}_${version}-1_$(deb_arch "$arch").deb"
  dpkg-deb --root-owner-group -Zxz --build "$stage" "$out" >/dev/null
  dpkg-deb --info "$out" >/dev/null
  echo "   $(basename "$out"): $(dpkg-deb --contents "$out" | grep -vc '/$') files"
}

# rpmbuild from a staged tree (no %build: the binaries exist).
build_rpm() { # STAGE NAME ARCH
  local stage=$1 name=$2 arch=$3 top out
  top=$(mktemp -d)
  rpmbuild -bb --quiet --target "$arch-linux" \
    --define "_topdir $top" --define "_rpmdir $dist" \
    --define '_build_name_fmt %%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm' \
    --define "rlx_version $version" --define "rlx_stage $stage" \
    "packaging/rpm/$name.spec" >/dev/null
  rm -rf "$top"
  out="$dist/$name-$version-1.$arch.rpm"
  [ -e "$out" ] || { echo ".ci/release: rpmbuild did not write $out" >&2; exit 1; }
  # rpm's own dependency generator reads the ELF: the glibc it asks for must
  # be within the floor too.
  local newest
  newest=$(rpm -qp --requires "$out" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
  if [ -n "$newest" ] && ! within_floor "$newest"; then
    echo ".ci/release: $out requires GLIBC_$newest, above the floor $floor (rpm -qp --requires $out)" >&2
    exit 1
  fi
  echo "   $(basename "$out"): $(rpm -qpl "$out" 2>/dev/null | wc -l) files"
}

package_agent() { # ARCH BINARY
  local arch=$1 bin=$2 deb rpm
  for kind in deb rpm; do
    [ "$kind" = rpm ] && [ "$quick" = 1 ] && continue
    local s="$stage_root/rlx-agent-$kind-$arch"
    install -D -m 755 "$bin" "$s/usr/bin/rlx-agent"
    # Debian's systemd finds units in /lib/systemd/system also on systems
    # without a merged /usr (Ubuntu 20.04 upgraded from 18.04); RPM distros
    # use /usr/lib/systemd/system.
    local unitdir=/usr/lib/systemd/system zshdir=/usr/share/zsh/site-functions
    [ "$kind" = deb ] && unitdir=/lib/systemd/system zshdir=/usr/share/zsh/vendor-completions
    install -d "$s$unitdir"
    packaged_unit >"$s$unitdir/rlx-agent.service"
    install -D -m 644 worker-agent/agent.toml "$s/etc/rlx/agent.toml"
    install -D -m 644 "$docs/agent/man/man1/rlx-agent.1.gz" "$s/usr/share/man/man1/rlx-agent.1.gz"
    common_files "$s" rlx-agent "$docs/agent/completions" "$zshdir"
    if [ "$kind" = deb ]; then
      # passwd: groupadd in the postinst; systemd 235: DynamicUser= with
      # StateDirectory= (docs/security.md, "systemd versions").
      build_deb "$s" rlx-agent "$arch" "libc6 (>= $floor), passwd, systemd (>= 235)" \
        "announces this machine to RLX coordinators (mDNS _rlx._tcp)
 rlx-agent runs on every box of an RLX cluster, beside the RLX worker. It
 probes the hardware (cores, memory, disk, CUDA, ROCm, Vulkan, Metal),
 announces the DNS-SD service _rlx._tcp over mDNS with those capabilities,
 answers the rlx handshake on TCP 6184 and says goodbye when it stops.
 Settings: /etc/rlx/agent.toml. Self-check: rlx-agent check." \
        /etc/rlx/agent.toml
    else
      build_rpm "$s" rlx-agent "$arch"
    fi
  done
}

package_discover() { # ARCH BINARY
  local arch=$1 bin=$2
  for kind in deb rpm; do
    local s="$stage_root/rlx-discover-$kind-$arch" zshdir=/usr/share/zsh/site-functions
    [ "$kind" = deb ] && zshdir=/usr/share/zsh/vendor-completions
    install -D -m 755 "$bin" "$s/usr/bin/rlx-discover"
    install -d "$s/usr/share/man/man1"
    install -m 644 "$docs"/discover/man/man1/*.1.gz "$s/usr/share/man/man1/"
    common_files "$s" rlx-discover "$docs/discover/completions" "$zshdir"
    if [ "$kind" = deb ]; then
      build_deb "$s" rlx-discover "$arch" "libc6 (>= $floor)" \
        "writes an RLX cluster's [[node]] list from the machines it finds
 rlx-discover reads an RLX cluster file, finds the machines running
 rlx-agent (mDNS, unicast DNS-SD, SSH hosts, a subnet scan), picks each
 box's device and writes the finished [[node]] list. It also watches
 membership (rlx-discover watch) and diagnoses a LAN (rlx-discover doctor)."
    else
      build_rpm "$s" rlx-discover "$arch"
    fi
  done
}

# The tarball: both binaries and everything a manual install needs (the
# repository's unit, which expects /usr/local/bin, the config template,
# docs), for Ansible roles and images that do not use packages.
tarball() { # ARCH DIR
  local arch=$1 dir=$2 name="rlx-$version-$1-linux-gnu" t
  t="$stage_root/tar/$name"
  install -d "$t/bin" "$t/man/man1" "$t/completions"
  install -m 755 "$dir/rlx-agent" "$dir/rlx-discover" "$t/bin/"
  install -m 644 worker-agent/rlx-agent.service worker-agent/agent.toml README.md LICENSE-MIT LICENSE-APACHE "$t/"
  install -m 644 "$docs"/agent/man/man1/*.gz "$docs"/discover/man/man1/*.gz "$t/man/man1/"
  install -m 644 "$docs"/agent/completions/* "$docs"/discover/completions/* "$t/completions/"
  tar -C "$stage_root/tar" --owner=0 --group=0 --sort=name -czf "$dist/$name.tar.gz" "$name"
  echo "   $name.tar.gz: $(tar -tzf "$dist/$name.tar.gz" | grep -vc '/$') files"
}
