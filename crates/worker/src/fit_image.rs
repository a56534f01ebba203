//! Images sized for the model: a screenshot shown to the worker is scaled down to the longest side
//! the vendors recommend (larger ones are scaled by the API anyway, at the same token cost) and
//! encoded as the smaller of PNG and JPEG. Kept screenshots never pass through here: people get
//! them lossless, at full size.

use std::io::Cursor;

use image::codecs::jpeg::JpegEncoder;
use image::imageops::FilterType;
use image::{DynamicImage, ImageFormat, ImageReader, Limits};

use crate::messages::Image;
use crate::ports::{ToolFailure, ToolOutput};

/// JPEG quality for screenshots: text stays legible, flat areas compress well.
const JPEG_QUALITY: u8 = 85;
/// The longest side decoded: full-page screenshots of long pages reach tens of thousands of
/// pixels (40,000 for the benchmark's 2,000 links); the allocation bound below is what protects.
const LARGEST_SIDE: u32 = 65_535;
/// What decoding may allocate, so a hostile image cannot exhaust memory.
const LARGEST_DECODE_BYTES: u64 = 512 * 1024 * 1024;

/// A tool's images fitted for the model, off the async threads (decoding and encoding a large
/// screenshot takes long enough to stall other tasks).
pub(crate) async fn fit_outcome(
    outcome: Result<ToolOutput, ToolFailure>,
    max_side: u32,
) -> Result<ToolOutput, ToolFailure> {
    let mut output = outcome?;
    if output.images.is_empty() {
        return Ok(output);
    }
    let images = std::mem::take(&mut output.images);
    let fitted = tokio::task::spawn_blocking(move || {
        images
            .into_iter()
            .map(|image| fit_for_model(image, max_side))
            .collect::<Vec<_>>()
    })
    .await;
    match fitted {
        Ok(images) => output.images = images,
        Err(error) => {
            tracing::error!(%error, "fitting a screenshot for the model failed");
            output
                .text
                .push_str("\n[A screenshot was taken but could not be prepared to show you.]");
        }
    }
    Ok(output)
}

/// `image` as a model should see it: no side over `max_side`, in the smaller of PNG and JPEG.
/// An image that cannot be decoded is returned as it is (the API judges it; nothing is lost).
pub fn fit_for_model(image: Image, max_side: u32) -> Image {
    let Some(decoded) = decode(&image) else {
        return image;
    };
    let (width, height) = (decoded.width(), decoded.height());
    let longest = width.max(height);
    let scaled = if longest > max_side {
        let ratio = f64::from(max_side) / f64::from(longest);
        let fit = |side: u32| scale(side, ratio);
        decoded.resize_exact(fit(width), fit(height), FilterType::Triangle)
    } else {
        decoded
    };
    let mut best = if longest > max_side {
        encode_png(&scaled).unwrap_or(image)
    } else {
        image
    };
    if let Some(jpeg) = encode_jpeg(&scaled)
        && jpeg.data.len() < best.data.len()
    {
        best = jpeg;
    }
    best
}

/// `side × ratio`, at least one pixel. Sides are at most [`LARGEST_SIDE`], so the float is exact.
fn scale(side: u32, ratio: f64) -> u32 {
    let scaled = (f64::from(side) * ratio).round().max(1.0);
    // In range: 1 ≤ scaled ≤ side ≤ LARGEST_SIDE.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let scaled = scaled as u32;
    scaled
}

fn decode(image: &Image) -> Option<DynamicImage> {
    let format = match image.media_type.as_str() {
        "image/png" => ImageFormat::Png,
        "image/jpeg" => ImageFormat::Jpeg,
        _ => return None,
    };
    let mut reader = ImageReader::with_format(Cursor::new(&image.data), format);
    let mut limits = Limits::default();
    limits.max_image_width = Some(LARGEST_SIDE);
    limits.max_image_height = Some(LARGEST_SIDE);
    limits.max_alloc = Some(LARGEST_DECODE_BYTES);
    reader.limits(limits);
    reader.decode().ok()
}

fn encode_png(image: &DynamicImage) -> Option<Image> {
    let mut data = Vec::new();
    image
        .write_to(&mut Cursor::new(&mut data), ImageFormat::Png)
        .ok()?;
    Some(Image::png(data))
}

fn encode_jpeg(image: &DynamicImage) -> Option<Image> {
    let mut data = Vec::new();
    // JPEG has no alpha channel.
    let rgb = image.to_rgb8();
    JpegEncoder::new_with_quality(&mut data, JPEG_QUALITY)
        .encode_image(&rgb)
        .ok()?;
    Some(Image {
        media_type: "image/jpeg".to_owned(),
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::{Rgb, RgbImage};

    /// A page-like picture: text-ish stripes on white, with a photo-like gradient block.
    fn screenshot(width: u32, height: u32) -> Image {
        let picture = RgbImage::from_fn(width, height, |x, y| {
            if y % 24 < 12 && x % 9 < 6 && x < width * 2 / 3 {
                Rgb([30, 30, 30])
            } else if x >= width * 2 / 3 {
                Rgb([byte(x), byte(y), byte(x + y)])
            } else {
                Rgb([255, 255, 255])
            }
        });
        encode_png(&DynamicImage::ImageRgb8(picture)).unwrap()
    }

    fn byte(value: u32) -> u8 {
        u8::try_from(value % 256).unwrap()
    }

    fn size(image: &Image) -> (u32, u32) {
        let decoded = decode(image).unwrap();
        (decoded.width(), decoded.height())
    }

    #[test]
    fn a_tall_full_page_screenshot_is_scaled_to_the_longest_side() {
        let original = screenshot(1280, 6000);
        let shown = fit_for_model(original.clone(), 1568);
        let (width, height) = size(&shown);
        assert_eq!(height, 1568);
        assert_eq!(width, 335, "the aspect ratio is kept (1280 × 1568 / 6000)");
        assert!(
            shown.data.len() < original.data.len() / 4,
            "{} of {}",
            shown.data.len(),
            original.data.len()
        );
    }

    #[test]
    fn a_screenshot_within_the_limit_keeps_its_size_and_never_grows() {
        let original = screenshot(1280, 720);
        let shown = fit_for_model(original.clone(), 1568);
        assert_eq!(size(&shown), (1280, 720));
        assert!(shown.data.len() <= original.data.len());
    }

    #[test]
    fn what_cannot_be_decoded_passes_unchanged() {
        let garbage = Image::png(b"not a png at all".to_vec());
        assert_eq!(fit_for_model(garbage.clone(), 1568), garbage);
        let webp = Image {
            media_type: "image/webp".into(),
            data: vec![1, 2, 3],
        };
        assert_eq!(fit_for_model(webp.clone(), 1568), webp);
    }
}
